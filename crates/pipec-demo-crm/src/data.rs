//! The CRM's records: deals, their activity and their emails, made up deterministically
//! from the deal's id and the corpus sizes alone, so every process (and every test) sees
//! the same bytes for the same request.

use serde::Serialize;

use super::dates::Date;

/// How many records each deal has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Corpus {
    pub(crate) emails: usize,
    pub(crate) activities: usize,
}

/// The first and last day of the email and activity history.
pub(crate) const HISTORY_START: &str = "2025-01-01";
pub(crate) const HISTORY_END: &str = "2025-12-31";

/// Characters of an email's body: with its headers one email is just under 1 KB of JSON,
/// so the default 100 emails (a whole history) stay under the 100 kB of `deal_research.pipe`'s
/// `read_emails`.
const EMAIL_BODY_CHARS: usize = 800;

const WORDS: &[&str] = &[
    "renewal",
    "pricing",
    "discount",
    "quarter",
    "pipeline",
    "forecast",
    "contract",
    "signature",
    "legal",
    "procurement",
    "security",
    "review",
    "onboarding",
    "rollout",
    "seats",
    "licence",
    "budget",
    "approval",
    "champion",
    "stakeholder",
    "demo",
    "pilot",
    "metrics",
    "integration",
    "timeline",
    "kickoff",
    "invoice",
    "terms",
    "volume",
    "tier",
    "upgrade",
    "expansion",
    "churn",
    "risk",
    "meeting",
    "agenda",
    "proposal",
    "draft",
    "redlines",
    "sponsor",
    "evaluation",
    "architecture",
    "residency",
    "audit",
];

const FIRST_NAMES: &[&str] = &[
    "Ada", "Alan", "Barbara", "Claude", "Dana", "Edsger", "Grace", "Ivan", "Joan", "Ken", "Linus",
    "Margaret", "Niklaus", "Radia", "Tim",
];
const LAST_NAMES: &[&str] = &[
    "Lovelace",
    "Turing",
    "Liskov",
    "Shannon",
    "Scott",
    "Dijkstra",
    "Hopper",
    "Sutherland",
    "Clarke",
    "Thompson",
    "Torvalds",
    "Hamilton",
    "Wirth",
    "Perlman",
    "Berners",
];
const COMPANIES: &[&str] = &[
    "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vehement", "Soylent", "Stark", "Wayne",
    "Tyrell",
];
const DEAL_KINDS: &[&str] = &["platform", "enterprise", "expansion", "renewal"];
const STAGES: &[&str] = &[
    "prospecting",
    "qualification",
    "proposal",
    "negotiation",
    "closed-won",
];
const ACTIVITY_KINDS: &[&str] = &["call", "meeting", "note", "stage-change", "task"];

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Deal {
    pub(crate) deal_id: String,
    pub(crate) name: String,
    pub(crate) company: String,
    pub(crate) stage: String,
    pub(crate) amount: u64,
    pub(crate) currency: String,
    pub(crate) owner: String,
    pub(crate) close_date: String,
    pub(crate) contacts: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Email {
    pub(crate) id: String,
    pub(crate) date: String,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) subject: String,
    pub(crate) body: String,
}

/// A date range of a deal's emails, borrowed from its whole history.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct EmailPage<'a> {
    pub(crate) deal_id: &'a str,
    pub(crate) start: &'a str,
    pub(crate) end: &'a str,
    pub(crate) count: usize,
    pub(crate) emails: &'a [Email],
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Activity {
    pub(crate) at: String,
    pub(crate) kind: String,
    pub(crate) by: String,
    pub(crate) summary: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ActivityLog {
    pub(crate) deal_id: String,
    pub(crate) activity: Vec<Activity>,
}

/// A small random number generator (splitmix64) seeded by a hash of what it is for, so
/// each record's values depend on nothing but its identity.
struct Dice {
    state: u64,
}

impl Dice {
    fn for_parts(parts: &[&str]) -> Dice {
        // FNV-1a: stable across Rust versions and platforms, unlike std's hasher.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                hash ^= 0x1f;
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            for byte in part.bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        Dice { state: hash }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let len = items.len().max(1) as u64;
        items
            .get((self.next() % len) as usize)
            .copied()
            .unwrap_or_default()
    }

    fn person(&mut self) -> String {
        format!("{} {}", self.pick(FIRST_NAMES), self.pick(LAST_NAMES))
    }
}

/// 2025-01-01, the first day of the history, as days since 1970-01-01 (a test checks it).
const FIRST_DAY: Date = Date::from_epoch_days(20_089);

/// The day of the `index`th of `count` records spread evenly over the history.
fn spread_day(index: usize, count: usize) -> String {
    let span = 365u64;
    let offset = (index as u64).saturating_mul(span) / (count.max(1) as u64);
    FIRST_DAY.plus_days(offset as i64).to_string()
}

pub(crate) fn deal(deal_id: &str) -> Deal {
    let mut dice = Dice::for_parts(&["deal", deal_id]);
    let company = dice.pick(COMPANIES);
    let name = format!(
        "{company} {} {}",
        dice.pick(DEAL_KINDS),
        dice.between(2025, 2027)
    );
    let stage = dice.pick(STAGES).to_string();
    let amount = dice.between(10, 900) * 1000;
    let owner = dice.person();
    // Closing after the history ends: 2025-12-31 is day 364 of 2025.
    let close_date = FIRST_DAY
        .plus_days(364 + dice.between(1, 120) as i64)
        .to_string();
    let contacts = (0..3).map(|_| dice.person()).collect();
    Deal {
        deal_id: deal_id.to_string(),
        name,
        company: company.to_string(),
        stage,
        amount,
        currency: "EUR".into(),
        owner,
        close_date,
        contacts,
    }
}

/// `ada.lovelace@acme.example` for Ada Lovelace at Acme.
fn address(person: &str, company: &str) -> String {
    let local = person.to_lowercase().replace(' ', ".");
    format!("{local}@{}.example", company.to_lowercase())
}

/// The sentences email bodies are made of, the same for every deal.
fn sentences() -> Vec<String> {
    let mut dice = Dice::for_parts(&["sentences"]);
    (0..256)
        .map(|_| {
            let count = dice.between(6, 14);
            let words: Vec<&str> = (0..count).map(|_| dice.pick(WORDS)).collect();
            let mut sentence = words.join(" ");
            if let Some(first) = sentence.get(..1) {
                sentence = format!("{}{}", first.to_uppercase(), &sentence[1..]);
            }
            sentence.push('.');
            sentence
        })
        .collect()
}

/// Every email of a deal, oldest first.
pub(crate) fn emails(deal_id: &str, corpus: Corpus) -> Vec<Email> {
    let deal = deal(deal_id);
    let count = corpus.emails.to_string();
    let mut dice = Dice::for_parts(&["emails", deal_id, &count]);
    let sentences = sentences();
    let sentence_refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let mut people: Vec<&str> = deal.contacts.iter().map(String::as_str).collect();
    people.push(&deal.owner);
    (0..corpus.emails)
        .map(|i| {
            let sender = dice.pick(&people);
            let recipient = if sender == deal.owner {
                dice.pick(&people[..people.len().saturating_sub(1)])
            } else {
                deal.owner.as_str()
            };
            let mut body = String::new();
            while body.len() < EMAIL_BODY_CHARS {
                if !body.is_empty() {
                    body.push(' ');
                }
                body.push_str(dice.pick(&sentence_refs));
            }
            // The sentences are ASCII, so any byte count is a char boundary.
            body.truncate(EMAIL_BODY_CHARS);
            Email {
                id: format!("{deal_id}-m{i:06}"),
                date: spread_day(i, corpus.emails),
                from: address(sender, &deal.company),
                to: address(recipient, &deal.company),
                subject: format!(
                    "Re: {} - {} {}",
                    deal.name,
                    dice.pick(WORDS),
                    dice.pick(WORDS)
                ),
                body,
            }
        })
        .collect()
}

/// The emails of a deal dated from `start` to `end`, both included (dates as
/// `YYYY-MM-DD`, which sort as text the way they sort as days), out of `emails`, its
/// whole history oldest first: the range is one run of it.
pub(crate) fn email_page<'a>(
    deal_id: &'a str,
    start: &'a str,
    end: &'a str,
    emails: &'a [Email],
) -> EmailPage<'a> {
    let first = emails.partition_point(|e| e.date.as_str() < start);
    let past = emails
        .partition_point(|e| e.date.as_str() <= end)
        .max(first);
    let emails = &emails[first..past];
    EmailPage {
        deal_id,
        start,
        end,
        count: emails.len(),
        emails,
    }
}

pub(crate) fn activity_log(deal_id: &str, corpus: Corpus) -> ActivityLog {
    let deal = deal(deal_id);
    let count = corpus.activities.to_string();
    let mut dice = Dice::for_parts(&["activity", deal_id, &count]);
    let mut people: Vec<&str> = deal.contacts.iter().map(String::as_str).collect();
    people.push(&deal.owner);
    let activity = (0..corpus.activities)
        .map(|i| Activity {
            at: spread_day(i, corpus.activities),
            kind: dice.pick(ACTIVITY_KINDS).to_string(),
            by: dice.pick(&people).to_string(),
            summary: (0..10)
                .map(|_| dice.pick(WORDS))
                .collect::<Vec<_>>()
                .join(" "),
        })
        .collect();
    ActivityLog {
        deal_id: deal_id.to_string(),
        activity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: Corpus = Corpus {
        emails: 100,
        activities: 50,
    };

    #[test]
    fn the_history_starts_and_ends_where_its_constants_say() {
        assert_eq!(FIRST_DAY.to_string(), HISTORY_START);
        assert_eq!(FIRST_DAY.plus_days(364).to_string(), HISTORY_END);
    }

    #[test]
    fn the_same_deal_gives_the_same_records_and_another_deal_other_ones() {
        assert_eq!(deal("D1"), deal("D1"));
        assert_eq!(emails("D1", CORPUS), emails("D1", CORPUS));
        assert_eq!(activity_log("D1", CORPUS), activity_log("D1", CORPUS));
        assert_ne!(emails("D1", CORPUS), emails("D2", CORPUS));
        assert_ne!(deal("D1").owner, "");
    }

    #[test]
    fn emails_cover_the_year_in_order_at_about_a_kilobyte_each() {
        let all = emails("D7", CORPUS);
        assert_eq!(all.len(), 100);
        assert_eq!(all[0].date, HISTORY_START);
        assert!(all[99].date.as_str() <= HISTORY_END && all[99].date.starts_with("2025-12"));
        assert!(all.windows(2).all(|w| w[0].date <= w[1].date));
        let bytes = serde_json::to_string(&all).map(|s| s.len()).unwrap_or(0);
        assert!((90_000..120_000).contains(&bytes), "{bytes} bytes");
        assert!(all.iter().all(|e| e.body.len() == EMAIL_BODY_CHARS));
        assert!(all.iter().all(|e| e.from != e.to));
    }

    #[test]
    fn a_page_holds_exactly_the_emails_of_its_dates() {
        let all = emails("D1", CORPUS);
        let page = email_page("D1", "2025-03-01", "2025-03-31", &all);
        assert!(page.count > 0 && page.count == page.emails.len());
        assert!(page.emails.iter().all(|e| e.date.starts_with("2025-03")));
        let march = all.iter().filter(|e| e.date.starts_with("2025-03")).count();
        assert_eq!(page.count, march, "every email of March, none other");
        let whole = email_page("D1", HISTORY_START, HISTORY_END, &all);
        assert_eq!(whole.count, 100);
        let none = email_page("D1", "2026-01-01", "2026-12-31", &all);
        assert_eq!(none.count, 0);
        let backwards = email_page("D1", "2025-06-01", "2025-03-01", &all);
        assert_eq!(backwards.count, 0);
    }

    #[test]
    fn counts_of_zero_give_empty_histories() {
        let empty = Corpus {
            emails: 0,
            activities: 0,
        };
        assert!(emails("D1", empty).is_empty());
        assert!(activity_log("D1", empty).activity.is_empty());
    }
}
