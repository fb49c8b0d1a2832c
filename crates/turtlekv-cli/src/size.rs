//! Human-readable byte sizes: `64MiB`, `1.5GiB`, `512 KiB`, `4096`.

/// Binary units only: the knobs are memory sizes, and a `64MB` that meant
/// 64 000 000 would surprise. `MB`, `GB` and the like are accepted as the
/// same binary units, as most tools do for memory.
const UNITS: [(&str, u64); 5] = [
    ("", 1),
    ("K", 1 << 10),
    ("M", 1 << 20),
    ("G", 1 << 30),
    ("T", 1 << 40),
];

/// Parses a size; a plain number is bytes. Fractions are allowed with a
/// unit (`1.5GiB`) and rounded down to whole bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "invalid size {text:?}: expected a number of bytes with an optional unit, e.g. 4096, 512KiB, 64MiB, 1.5GiB"
        )
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let unit = unit.trim();
    let prefix = unit
        .strip_suffix("iB")
        .or_else(|| unit.strip_suffix("ib"))
        .or_else(|| unit.strip_suffix('B'))
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(unit);
    let multiplier = UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(prefix))
        .map(|&(_, m)| m)
        .ok_or_else(bad)?;
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(bad());
    }
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return Err(bad());
    }
    let too_large = || format!("size {text:?} is too large");
    let whole: u64 = whole.parse().map_err(|_| too_large())?;
    let mut bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    if !fraction.is_empty() {
        // Exact decimal arithmetic: 0.1 GiB must not come out a byte short
        // because of binary floating point.
        let digits = fraction.len().min(18);
        let numerator: u128 = fraction[..digits].parse().map_err(|_| bad())?;
        let part = numerator * u128::from(multiplier) / 10u128.pow(digits as u32);
        bytes = u64::try_from(part)
            .ok()
            .and_then(|p| bytes.checked_add(p))
            .ok_or_else(too_large)?;
    }
    Ok(bytes)
}

/// `67108864` as `64 MiB`, `1536` as `1.5 KiB`, `100` as `100 B`.
pub fn format_size(bytes: u64) -> String {
    let Some(&(unit, scale)) = UNITS.iter().rev().find(|(_, m)| bytes >= *m) else {
        return "0 B".to_string();
    };
    if scale == 1 {
        return format!("{bytes} B");
    }
    let value = bytes as f64 / scale as f64;
    if bytes.is_multiple_of(scale) {
        format!("{} {unit}iB", bytes / scale)
    } else {
        format!("{value:.1} {unit}iB")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_people_write() {
        for (text, bytes) in [
            ("4096", 4096),
            ("64MiB", 64 << 20),
            ("64 MiB", 64 << 20),
            ("64mib", 64 << 20),
            ("64M", 64 << 20),
            ("64MB", 64 << 20),
            ("1GiB", 1 << 30),
            ("1.5GiB", 3 << 29),
            ("512KiB", 512 << 10),
            ("0.5k", 512),
            ("10B", 10),
            ("2TiB", 2 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn garbage_is_refused() {
        for text in [
            "", "MiB", "lots", "64XiB", "1..5GiB", "1.5.2G", ".5G", "5.G", "-1", "1e9", "64 MiB x",
        ] {
            let err = parse_size(text).unwrap_err();
            assert!(err.contains("invalid size"), "{text}: {err}");
        }
        assert!(
            parse_size("99999999999TiB")
                .unwrap_err()
                .contains("too large")
        );
        assert!(
            parse_size("99999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn formatting() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(100), "100 B");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(1 << 30), "1 GiB");
    }
}
