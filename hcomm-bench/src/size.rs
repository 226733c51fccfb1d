//! Byte sizes as nccl-tests writes them (`4K`, `64M`, `1G`: powers of
//! 1024) and the geometric sweep `-b MIN -e MAX -f FACTOR`.

/// Parses `4096`, `4K`, `4k`, `4KiB`, `4KB`, `64M`, `1G` into bytes
/// (K, M and G are powers of 1024, as in nccl-tests).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a size: expected a number of bytes such as 4096, 4K, 64M or 1G"
        ));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("`{text}`: unknown unit `{unit}`; expected K, M or G")),
    };
    number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Writes `bytes` the way [`parse_size`] reads it, with the largest unit
/// that divides it exactly (`4K`, `64M`, `1536`).
pub fn format_size(bytes: usize) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The sizes `min, min * factor, min * factor^2, ...` up to and including
/// `max` (nccl-tests' `-b`, `-e`, `-f`).
pub fn sweep(min: usize, max: usize, factor: usize) -> Result<Vec<usize>, String> {
    if min == 0 {
        return Err("the smallest size (-b) must be at least 1 byte".into());
    }
    if max < min {
        return Err(format!(
            "the largest size (-e {}) is below the smallest (-b {})",
            format_size(max),
            format_size(min)
        ));
    }
    if factor < 2 && min != max {
        return Err(format!("the step factor (-f {factor}) must be at least 2"));
    }
    let mut sizes = vec![min];
    let mut last = min;
    while let Some(next) = last.checked_mul(factor).filter(|&s| s <= max && s > last) {
        sizes.push(next);
        last = next;
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size(" 1G "), Ok(1 << 30));
        assert_eq!(parse_size("12b"), Ok(12));
    }

    #[test]
    fn bad_sizes_are_errors_naming_the_problem() {
        assert!(parse_size("").unwrap_err().contains("not a size"));
        assert!(parse_size("K").unwrap_err().contains("not a size"));
        assert!(parse_size("4X").unwrap_err().contains("unknown unit `X`"));
        assert!(parse_size("-4K").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999999999999G").unwrap_err().contains("too large"));
    }

    #[test]
    fn sizes_format_back() {
        for s in ["4K", "64M", "1G", "1536", "3K"] {
            assert_eq!(format_size(parse_size(s).unwrap()), s);
        }
    }

    #[test]
    fn sweep_is_geometric_and_includes_both_ends() {
        assert_eq!(sweep(4 << 10, 64 << 20, 4).unwrap().len(), 8);
        assert_eq!(sweep(4096, 16384, 2).unwrap(), vec![4096, 8192, 16384]);
        assert_eq!(sweep(4096, 10000, 2).unwrap(), vec![4096, 8192]);
        assert_eq!(sweep(8, 8, 1).unwrap(), vec![8]);
        assert!(sweep(16, 8, 2).unwrap_err().contains("below the smallest"));
        assert!(sweep(8, 16, 1).unwrap_err().contains("at least 2"));
        assert!(sweep(0, 16, 2).is_err());
    }
}
