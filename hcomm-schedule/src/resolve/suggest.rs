//! "Did you mean" suggestions: the closest name within a small edit distance.

/// The closest candidate within a small edit distance of `name` (a third of
/// its length, at least 1); `name` itself is never suggested.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The hint of an `unknown name` diagnostic for `suggest`'s answer.
pub(crate) fn did_you_mean(name: &str) -> String {
    format!("did you mean `{name}`?")
}

/// Edit distance with adjacent transpositions (optimal string alignment):
/// `rnak` is one edit from `rank`.
fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

#[cfg(test)]
mod tests {
    use super::{distance, suggest};

    #[test]
    fn transposition_is_one_edit() {
        assert_eq!(distance("rnak", "rank"), 1);
        assert_eq!(distance("rank", "world"), 5);
        assert_eq!(distance("", "ab"), 2);
    }

    #[test]
    fn suggests_the_closest_within_a_third() {
        assert_eq!(suggest("rnak", ["world", "rank"]), Some("rank"));
        assert_eq!(suggest("rank", ["rank"]), None);
        assert_eq!(suggest("abcdef", ["uvwxyz"]), None);
        assert_eq!(suggest("stpe", ["step", "stop"]), Some("step"));
    }
}
