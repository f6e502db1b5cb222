//! Interface-name patterns (`device = "wlan*"`, `exclude = ["docker*"]`): shell-style
//! globs with `*` (any run), `?` (one character) and `[…]` classes (`[0-9]`, `[!0]`).
//!
//! A pattern is checked when the configuration loads, so a typo is an error naming its key
//! rather than a path that silently never matches. What Linux accepts as an interface name
//! bounds what a pattern may hold: at most 15 bytes (`IFNAMSIZ` less the terminator), and
//! no `/`, `:` or white space (`dev_valid_name`).

use std::fmt;

/// The longest interface name Linux accepts.
pub const IFNAME_MAX: usize = 15;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`
    One,
    /// `*`
    Star,
    /// `[…]`: ranges (a single character is a range of one), negated by a leading `!`.
    Class {
        negate: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A parsed interface-name pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfPattern {
    text: String,
    toks: Vec<Tok>,
}

impl fmt::Display for IfPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl IfPattern {
    /// Parses `s`; the error says what is wrong with it (the caller names the key).
    pub fn parse(s: &str) -> Result<IfPattern, String> {
        if s.is_empty() {
            return Err("empty interface name".into());
        }
        let mut toks = Vec::new();
        let mut chars = s.chars().peekable();
        // Characters one name needs at least, to refuse a pattern no name can match.
        let mut min_len = 0;
        while let Some(c) = chars.next() {
            match c {
                '*' => toks.push(Tok::Star),
                '?' => {
                    toks.push(Tok::One);
                    min_len += 1;
                }
                '[' => {
                    let negate = chars.next_if_eq(&'!').is_some();
                    let mut ranges = Vec::new();
                    loop {
                        let Some(a) = chars.next() else {
                            return Err(format!("{s:?}: '[' without its ']'"));
                        };
                        if a == ']' && !ranges.is_empty() {
                            break;
                        }
                        if a == ']' {
                            return Err(format!("{s:?}: empty class '[]'"));
                        }
                        valid_char(s, a)?;
                        if chars.next_if_eq(&'-').is_some() {
                            match chars.next() {
                                Some(']') | None => return Err(format!("{s:?}: range '{a}-' without its end")),
                                Some(b) if b < a => return Err(format!("{s:?}: range '{a}-{b}' is backwards")),
                                Some(b) => {
                                    valid_char(s, b)?;
                                    ranges.push((a, b));
                                }
                            }
                        } else {
                            ranges.push((a, a));
                        }
                    }
                    toks.push(Tok::Class { negate, ranges });
                    min_len += 1;
                }
                ']' => return Err(format!("{s:?}: ']' without its '['")),
                c => {
                    valid_char(s, c)?;
                    toks.push(Tok::Lit(c));
                    min_len += c.len_utf8();
                }
            }
        }
        if min_len > IFNAME_MAX {
            return Err(format!(
                "{s:?}: longer than an interface name can be ({IFNAME_MAX} characters)"
            ));
        }
        if s == "." || s == ".." {
            return Err(format!("{s:?} is not an interface name"));
        }
        Ok(IfPattern {
            text: s.to_string(),
            toks,
        })
    }

    /// Whether the pattern names one interface (no wildcard).
    pub fn is_literal(&self) -> bool {
        self.toks.iter().all(|t| matches!(t, Tok::Lit(_)))
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        match_at(&self.toks, &name)
    }
}

fn valid_char(s: &str, c: char) -> Result<(), String> {
    if c == '/' || c == ':' || c.is_whitespace() || c.is_control() {
        return Err(format!("{s:?}: {c:?} cannot be part of an interface name"));
    }
    Ok(())
}

/// Backtracking match; interface names are at most 15 characters, so this stays small.
fn match_at(toks: &[Tok], name: &[char]) -> bool {
    let Some((t, rest)) = toks.split_first() else {
        return name.is_empty();
    };
    match t {
        Tok::Star => (0..=name.len()).any(|skip| match_at(rest, &name[skip..])),
        _ => {
            let Some((&c, tail)) = name.split_first() else {
                return false;
            };
            let ok = match t {
                Tok::Lit(l) => *l == c,
                Tok::One => true,
                Tok::Class { negate, ranges } => ranges.iter().any(|&(a, b)| a <= c && c <= b) != *negate,
                Tok::Star => unreachable!(),
            };
            ok && match_at(rest, tail)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IfPattern {
        IfPattern::parse(s).unwrap()
    }

    #[test]
    fn globs_match_as_a_shell_would() {
        assert!(p("wlan*").matches("wlan0"));
        assert!(p("wlan*").matches("wlan"));
        assert!(!p("wlan*").matches("wwan0"));
        assert!(p("*").matches("lo"));
        assert!(p("eth?").matches("eth1") && !p("eth?").matches("eth10"));
        assert!(p("c[0-9]").matches("c2") && !p("c[0-9]").matches("cx"));
        assert!(p("c[!0]").matches("c1") && !p("c[!0]").matches("c0"));
        assert!(p("enp*s0").matches("enp3s0") && !p("enp*s0").matches("enp3s0f1"));
        assert!(p("br-*").matches("br-1a2b"));
        assert!(p("wlan0").is_literal() && !p("wlan*").is_literal());
    }

    #[test]
    fn a_pattern_no_interface_name_can_match_is_refused_with_the_reason() {
        for (bad, why) in [
            ("", "empty"),
            ("wlan[0", "without its ']'"),
            ("wlan]", "without its '['"),
            ("wlan[]", "empty class"),
            ("c[9-0]", "backwards"),
            ("c[0-]", "without its end"),
            ("eth 0", "cannot be part"),
            ("eth0:1", "cannot be part"),
            ("a/b", "cannot be part"),
            ("averyveryverylongname", "longer than"),
            ("..", "not an interface name"),
        ] {
            let e = IfPattern::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        // Wildcards make no name longer: a long pattern of stars is fine.
        assert!(IfPattern::parse("wlan*****************").is_ok());
    }
}
