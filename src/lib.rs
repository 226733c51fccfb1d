//! Communication schedules written in the `comm_schedule!` language, used by
//! the examples and checked against the runtime's built-in collectives in
//! `tests/`. Every schedule here is verified at compile time for its whole
//! `#[verify]` range.

pub mod all_gather;
pub mod collectives;
pub mod vcollectives;

/// An error as the workspace's tools print it: its `Display` form, then
/// each underlying cause after `: `.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::fmt;

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("cannot write the drawing")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_chain_is_the_display_forms_of_every_cause() {
        let e = Outer(std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"));
        assert_eq!(super::error_chain(&e), "cannot write the drawing: no such directory");
        let plain = hcomm::Error::Config {
            message: "`HCOMM_TIMEOUT=x` is not a number".into(),
        };
        assert_eq!(
            super::error_chain(&plain),
            "configuration: `HCOMM_TIMEOUT=x` is not a number"
        );
    }
}
