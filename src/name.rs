//! Names that cross the wire: `biz_tag`s and registry node keys share one rule,
//! 1–128 characters of `[A-Za-z0-9._:-]` (Leaf's `varchar(128)`, and safe in a
//! URL path segment without escaping; the Worker also reads one
//! percent-encoded, as `encodeURIComponent` writes `:`).

use crate::error::Error;

/// The longest name (a tag or a node key), in characters.
pub const MAX_NAME_LEN: usize = 128;

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// Checks a name; `what` says which in the error (`"biz_tag"`, `"node_key"`).
///
/// # Errors
/// [`Error::InvalidKey`] for an empty or over-long key or a character outside
/// `[A-Za-z0-9._:-]`.
pub fn check_name(what: &'static str, key: &str) -> Result<(), Error> {
    let len = key.len();
    if let Some(bad) = key.chars().find(|c| !allowed(*c)) {
        return Err(Error::InvalidKey {
            what,
            len,
            bad_char: Some(bad),
        });
    }
    // All characters are ASCII now, so bytes are characters.
    if len == 0 || len > MAX_NAME_LEN {
        return Err(Error::InvalidKey {
            what,
            len,
            bad_char: None,
        });
    }
    Ok(())
}

/// Checks a `biz_tag`.
///
/// # Errors
/// As [`check_name`].
pub fn check_tag(tag: &str) -> Result<(), Error> {
    check_name("biz_tag", tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_rule() {
        assert!(check_tag("order").is_ok());
        assert!(check_tag("leaf-segment-test.v2:eu_1").is_ok());
        assert!(check_tag(&"a".repeat(128)).is_ok());
        assert_eq!(
            check_tag(&"a".repeat(129)),
            Err(Error::InvalidKey {
                what: "biz_tag",
                len: 129,
                bad_char: None
            })
        );
        assert!(check_tag("").is_err());
        assert_eq!(
            check_tag("a/b"),
            Err(Error::InvalidKey {
                what: "biz_tag",
                len: 3,
                bad_char: Some('/')
            })
        );
        assert!(check_tag("tag é").is_err());
        assert!(check_tag("a b").is_err());
    }
}
