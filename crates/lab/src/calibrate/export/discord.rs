//! DiscordChatExporter's JSON export
//! (<https://github.com/Tyrrrz/DiscordChatExporter>): an object with
//! `guild`, `channel` and `messages`, each message with `id`, `type`,
//! `timestamp` (ISO 8601), `timestampEdited`, `author` (`id`, `name`,
//! `isBot`) and `reference` (`messageId`: the message replied to).
//!
//! Messages of type `Default` and `Reply` are read; `GuildMemberJoin`,
//! `RecipientAdd` and `RecipientRemove` are joins; any other type (pins,
//! thread creation, calls) is a system message, left out. An edited
//! message counts once, at its `timestamp`. Deleted messages are not in
//! such an export.

use super::Reading;
use super::raw::{self, Content, RawMsg};

/// A message of Discord's into the reading.
pub(super) fn add(m: RawMsg, r: &mut Reading) -> Result<(), String> {
    match m.kind.as_deref() {
        None | Some("Default" | "Reply") => {}
        Some("GuildMemberJoin" | "RecipientAdd" | "RecipientRemove") => {
            r.counts.joins += 1;
            return Ok(());
        }
        Some(_) => {
            r.counts.system += 1;
            return Ok(());
        }
    }
    let id = m.id.ok_or("a Discord message without an `id`")?;
    let stamp = m
        .timestamp
        .as_deref()
        .ok_or("a Discord message without a `timestamp`")?;
    let t_us = rfc3339_us(stamp).ok_or_else(|| {
        format!(
            "a Discord message's `timestamp` {:?} is not ISO 8601",
            raw::clip(stamp, 80)
        )
    })?;
    let author = m.author.ok_or("a Discord message without an `author`")?;
    let who = author
        .id
        .ok_or("a Discord message whose `author` has no `id`")?;
    let parent = m.reference.and_then(|x| x.message_id).filter(|p| *p != id);
    if m.timestamp_edited.is_some() {
        r.counts.edits += 1;
    }
    // Who it mentions: the `mentions` array, and `<@id>` in the text.
    let mut mentions = match m.content {
        Content::Text(ids) => ids,
        _ => Vec::new(),
    };
    for x in m.mentions.into_iter().flatten().filter_map(|x| x.id) {
        if mentions.len() < raw::MAX_MENTIONS && !mentions.contains(&x) {
            mentions.push(x);
        }
    }
    r.message(
        id,
        t_us,
        &who,
        author.name,
        author.is_bot == Some(true),
        false,
        parent,
        mentions,
    )
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The days of month `m` of year `y`.
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A time in µs since 1970 as `YYYY-MM-DD HH:MM UTC` (Howard Hinnant's
/// civil-from-days).
pub fn utc(t_us: i64) -> String {
    let secs = t_us.div_euclid(1_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// An ISO 8601 / RFC 3339 time (`2024-01-31T12:00:00.123+00:00`, `Z`, or
/// a space for the `T`) in µs since 1970 (digits past the µs dropped).
pub fn rfc3339_us(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = s.get(from..from + n)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (h, mi, se) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60
    {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i];
        micros = format!("{:0<6}", &digits[..digits.len().min(6)])
            .parse()
            .ok()?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(c @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let off = digits(i + 1, 2)? * 60 + digits(i + 4, 2)?;
            if *c == b'-' { -off } else { off }
        }
        None => 0,
        _ => return None,
    };
    if !(0..=9999).contains(&y) {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::rfc3339_us;

    fn rfc3339_ms(s: &str) -> Option<f64> {
        rfc3339_us(s).map(|us| us as f64 / 1000.0)
    }

    #[test]
    fn iso_times_in_ms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            rfc3339_ms("1970-01-02T00:00:01.5+00:00"),
            Some(86_401_500.0)
        );
        assert_eq!(rfc3339_ms("1970-01-01T01:00:00+01:00"), Some(0.0));
        assert_eq!(
            rfc3339_ms("2024-03-01T00:00:00.000-05:00"),
            Some(1_709_269_200_000.0)
        );
        assert_eq!(rfc3339_ms("2024-13-01T00:00:00Z"), None);
        assert_eq!(rfc3339_ms("yesterday"), None);
        assert_eq!(rfc3339_ms("2024-01-01T00:00:00+0100"), None);
        assert_eq!(rfc3339_ms("2023-02-29T00:00:00Z"), None);
        assert!(rfc3339_ms("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn times_print_back_as_utc() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2024-02-29T23:59:00Z",
            "1969-12-31T01:02:00Z",
        ] {
            let t = rfc3339_us(s).unwrap_or_default();
            assert_eq!(
                super::utc(t),
                format!("{} {} UTC", &s[..10], &s[11..16]),
                "{s}"
            );
        }
    }
}
