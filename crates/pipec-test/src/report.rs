//! Reports of a test run: for a person, as JSON, as JUnit XML.

use serde_json::json;

use crate::TestResult;

/// A line per test, then each failure with its condition and why, then the totals;
/// `unchecked` files did not check, so their tests did not run.
pub fn human(results: &[TestResult], unchecked: usize) -> String {
    let mut out = String::new();
    for r in results {
        out.push_str(&format!(
            "test {}::{} ... {} ({} ms)\n",
            r.file,
            r.name,
            if r.passed { "ok" } else { "FAILED" },
            r.ms
        ));
        if let Some(tape) = &r.recorded {
            out.push_str(&format!("  recorded {tape}\n"));
        }
        if let Some(snapshot) = &r.updated {
            out.push_str(&format!("  updated {snapshot}\n"));
        }
    }
    let failed: Vec<&TestResult> = results.iter().filter(|r| !r.passed).collect();
    for r in &failed {
        out.push_str(&format!("\n---- {}::{} ----\n", r.file, r.name));
        if let Some(t) = &r.thread {
            out.push_str(&format!(
                "thread {t} ({}): pipec show {t} --store {}\n",
                r.status.as_deref().unwrap_or("not started"),
                r.store
            ));
        }
        for f in &r.failures {
            out.push_str(&format!("{}:{}: {}\n", r.file, f.line, f.what));
            for line in f.message.lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let passed = results.len() - failed.len();
    let unchecked = match unchecked {
        0 => String::new(),
        1 => "; 1 file did not check".to_string(),
        n => format!("; {n} files did not check"),
    };
    out.push_str(&format!(
        "\ntest result: {}. {passed} passed; {} failed{unchecked}\n",
        if failed.is_empty() && unchecked.is_empty() {
            "ok"
        } else {
            "FAILED"
        },
        failed.len()
    ));
    out
}

/// Every result, as `pipec test --json` prints it; `unchecked` files did not check, so
/// their tests did not run.
pub fn json(results: &[TestResult], unchecked: usize) -> serde_json::Value {
    let failed = results.iter().filter(|r| !r.passed).count();
    json!({
        "format_version": 1,
        "passed": results.len() - failed,
        "failed": failed,
        "unchecked": unchecked,
        "tests": results,
    })
}

/// JUnit XML (`--junit FILE`): a suite per pipeline file, a case per test, a failure per
/// test that failed with each unmet condition in its text.
pub fn junit(results: &[TestResult]) -> Result<String, String> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("pipec test");
    let mut files: Vec<&str> = results.iter().map(|r| r.file.as_str()).collect();
    files.dedup();
    for file in files {
        let mut suite = TestSuite::new(file);
        for r in results.iter().filter(|r| r.file == file) {
            let status = if r.passed {
                TestCaseStatus::success()
            } else {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                let text: Vec<String> = r
                    .failures
                    .iter()
                    .map(|f| format!("{}:{}: {}\n{}", r.file, f.line, f.what, f.message))
                    .collect();
                s.set_message(
                    r.failures
                        .first()
                        .map_or_else(String::new, |f| f.what.clone()),
                );
                s.set_description(text.join("\n\n"));
                s
            };
            let mut case = TestCase::new(r.name.as_str(), status);
            case.set_classname(file);
            case.set_time(std::time::Duration::from_millis(r.ms));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string().map_err(|e| e.to_string())
}
