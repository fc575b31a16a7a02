//! Enums spelled as words in a contract and on the wire (`topic`, `dead-letter`,
//! `non-retryable`…): each spelling written once, with its parser.

use std::fmt;

/// A word that names no value of an enum: what [`str::parse`] returns for the enums of this
/// crate. Its message is serde's for an unknown variant, so a contract reads the same
/// whichever side reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// The word given.
    pub value: String,
    /// Every word the enum takes, in declaration order.
    pub expected: &'static [&'static str],
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown variant `{}`, expected ", self.value)?;
        match self.expected {
            [] => f.write_str("nothing"),
            [only] => write!(f, "`{only}`"),
            [first, second] => write!(f, "`{first}` or `{second}`"),
            [first, rest @ ..] => {
                write!(f, "one of `{first}`")?;
                for word in rest {
                    write!(f, ", `{word}`")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for UnknownName {}

/// An enum whose every variant has a spelling: the enum, `as_str`, `ALL`, `NAMES`, `FromStr`
/// and `Display`, from one list.
macro_rules! spelled {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];
            /// The spelling of every value, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),*];

            /// The value as written in a contract and sent on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),*
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::spelled::UnknownName;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok(Self::$variant),)*
                    _ => Err($crate::spelled::UnknownName {
                        value: text.to_owned(),
                        expected: Self::NAMES,
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use spelled;

#[cfg(test)]
mod tests {
    use crate::{
        Compression, ExchangeKind, Exhausted, FailureReason, LeaderLocator, OnPoison, QueueKind,
    };

    /// Every spelling parses back to its value: the list cannot hold a typo that only one
    /// direction would catch.
    #[test]
    fn every_spelling_round_trips() {
        fn check<T>(all: &[T], names: &[&str])
        where
            T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + std::str::FromStr,
            T::Err: std::fmt::Debug,
        {
            assert_eq!(all.len(), names.len());
            for (value, name) in all.iter().zip(names) {
                assert_eq!(value.to_string(), *name);
                assert_eq!(name.parse::<T>().expect(name), *value);
            }
        }
        check(ExchangeKind::ALL, ExchangeKind::NAMES);
        check(QueueKind::ALL, QueueKind::NAMES);
        check(LeaderLocator::ALL, LeaderLocator::NAMES);
        check(Exhausted::ALL, Exhausted::NAMES);
        check(OnPoison::ALL, OnPoison::NAMES);
        check(FailureReason::ALL, FailureReason::NAMES);
        check(Compression::ALL, Compression::NAMES);
    }

    #[test]
    fn an_unknown_word_reads_as_serde_says_it() {
        let error = "topics".parse::<ExchangeKind>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown variant `topics`, expected one of `topic`, `direct`, `fanout`, `headers`"
        );
        let error = "dlq".parse::<OnPoison>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown variant `dlq`, expected `dead-letter` or `drop`"
        );
    }
}
