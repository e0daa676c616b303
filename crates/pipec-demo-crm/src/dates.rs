//! Calendar dates as the CRM writes them (`YYYY-MM-DD`): checking one, and counting days
//! from one, without a date library.

use std::fmt;

/// A day of the proleptic Gregorian calendar, counted from 1970-01-01.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Date {
    days: i64,
}

impl Date {
    /// The date of a year, month and day, when there is one.
    pub(crate) fn new(year: i64, month: u32, day: u32) -> Option<Date> {
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        Some(Date {
            days: days_from_civil(year, month, day),
        })
    }

    /// Reads `YYYY-MM-DD`: four digits, two, two, and a date that exists (so
    /// `2025-02-29` is refused, `2024-02-29` is not).
    pub(crate) fn parse(text: &str) -> Option<Date> {
        let bytes = text.as_bytes();
        if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
            return None;
        }
        let digits = |range: std::ops::Range<usize>| -> Option<u32> {
            let part = text.get(range)?;
            if !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let year = digits(0..4)?;
        let month = digits(5..7)?;
        let day = digits(8..10)?;
        Date::new(i64::from(year), month, day)
    }

    /// The date `days` after 1970-01-01.
    pub(crate) const fn from_epoch_days(days: i64) -> Date {
        Date { days }
    }

    pub(crate) fn plus_days(self, days: i64) -> Date {
        Date {
            days: self.days.saturating_add(days),
        }
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = civil_from_days(self.days);
        write!(f, "{year:04}-{month:02}-{day:02}")
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// The two conversions count in eras of 400 years (146,097 days), which repeat exactly, with
// the year starting in March so that the leap day falls at its end.

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month = i64::from(month);
    let month_from_march = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are in range by construction: a month in 1..=12, a day in 1..=31.
    (year, month as u32, day as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_back_as_they_were_written() {
        for text in [
            "1970-01-01",
            "2024-02-29",
            "2025-12-31",
            "2000-03-01",
            "1999-12-31",
        ] {
            let date = Date::parse(text).map(|d| d.to_string());
            assert_eq!(date.as_deref(), Some(text));
        }
    }

    #[test]
    fn counting_days_crosses_months_years_and_leap_days() {
        let start = Date::parse("2025-01-01");
        assert_eq!(
            start.map(|d| d.plus_days(364).to_string()).as_deref(),
            Some("2025-12-31")
        );
        assert_eq!(
            start.map(|d| d.plus_days(59).to_string()).as_deref(),
            Some("2025-03-01")
        );
        let leap = Date::parse("2024-02-28").map(|d| d.plus_days(1).to_string());
        assert_eq!(leap.as_deref(), Some("2024-02-29"));
        assert_eq!(
            Date::parse("1970-01-01").map(|d| d.days),
            Some(0),
            "the epoch is day 0"
        );
    }

    #[test]
    fn what_is_not_a_date_is_refused() {
        for text in [
            "",
            "2025-1-01",
            "2025-13-01",
            "2025-00-10",
            "2025-02-29",
            "2025-04-31",
            "2025/01/01",
            "20250101xx",
            "2025-01-0a",
            "+025-01-01",
            "２025-01-01",
            "not-a-date",
        ] {
            assert_eq!(Date::parse(text), None, "{text:?}");
        }
    }
}
