//! Fixed wire and database names of the domain's fieldless enums.

/// A text that names no value of the enum it was parsed as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value `{0}`")]
pub struct UnknownName(pub String);

/// Gives a fieldless enum `ALL` (every value, in declaration order), `as_str` (its wire
/// and database name), `Display` and `FromStr` from one list of `Variant => "name"`, so
/// the spelling lives in one place.
macro_rules! wire_names {
    ($ty:ident, $doc:literal { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            #[doc = $doc]
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The wire and database spelling, the same as the serde one.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::domain::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::domain::names::UnknownName(s.to_owned())),
                }
            }
        }
    };
}

pub(crate) use wire_names;
