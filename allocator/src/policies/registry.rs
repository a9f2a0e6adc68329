//! The registry of policies: [`PolicySpec`] names a policy with its
//! settings, parses it from a name and a settings string, and
//! [`with_policy!`](crate::with_policy) builds the allocator it describes.
//! Adding a policy means adding its module next to this file and one arm
//! to each `match` here.

use std::fmt;

use crate::policies::{async_pool, bfc, direct, plan, stitch};
use crate::{AllocConf, TorchVersion};

/// A policy and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySpec {
    /// PyTorch's native caching allocator with a `PYTORCH_ALLOC_CONF`.
    Native(AllocConf),
    /// No caching (`PYTORCH_NO_CUDA_MEMORY_CACHING=1`).
    Direct(direct::Settings),
    /// TensorFlow / XLA BFC allocator.
    Bfc(bfc::Settings),
    /// A stream-ordered pool like cudaMallocAsync.
    Async(async_pool::Settings),
    /// GMLake-style virtual-memory stitching.
    Stitch(stitch::Settings),
    /// An offline plan of the trace, PyTorch's allocator for the rest.
    Plan(plan::Settings),
}

/// A policy by name, as `--policy` and a grid line's `policy=` give it. A
/// new policy is added here, to [`PolicySpec`] and to the `match` arms
/// below (and `with_policy!`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PolicyKind {
    /// PyTorch's native caching allocator.
    #[default]
    Native,
    /// No caching.
    Direct,
    /// TensorFlow / XLA BFC allocator.
    Bfc,
    /// A stream-ordered pool like cudaMallocAsync.
    Async,
    /// GMLake-style virtual-memory stitching.
    Stitch,
    /// An offline plan of the trace replayed, PyTorch's allocator for the
    /// rest (STAlloc-style).
    Plan,
}

impl PolicyKind {
    /// Every policy, `native` first.
    pub const ALL: [PolicyKind; 6] = [
        PolicyKind::Native,
        PolicyKind::Direct,
        PolicyKind::Bfc,
        PolicyKind::Async,
        PolicyKind::Stitch,
        PolicyKind::Plan,
    ];

    /// Its name, as its allocator's `Inspect::name` gives it.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Native => "native",
            PolicyKind::Direct => "direct",
            PolicyKind::Bfc => "bfc",
            PolicyKind::Async => "async",
            PolicyKind::Stitch => "stitch",
            PolicyKind::Plan => "plan",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<PolicyKind, String> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown policy '{s}' (known: {})", known.join(", "))
            })
    }
}

impl PolicySpec {
    /// Builds the policy `name` from its settings string.
    pub fn parse(name: &str, settings: &str, version: TorchVersion) -> Result<PolicySpec, String> {
        PolicySpec::of(name.parse()?, settings, version)
    }

    /// Builds the policy `kind` from its settings string (`default` or
    /// empty: its defaults).
    pub fn of(
        kind: PolicyKind,
        settings: &str,
        version: TorchVersion,
    ) -> Result<PolicySpec, String> {
        let s = if settings == "default" { "" } else { settings };
        match kind {
            PolicyKind::Native => AllocConf::parse(s, version)
                .map(PolicySpec::Native)
                .map_err(|e| e.to_string()),
            PolicyKind::Direct => direct::Settings::parse(s).map(PolicySpec::Direct),
            PolicyKind::Bfc => bfc::Settings::parse(s).map(PolicySpec::Bfc),
            PolicyKind::Async => async_pool::Settings::parse(s).map(PolicySpec::Async),
            PolicyKind::Stitch => stitch::Settings::parse(s).map(PolicySpec::Stitch),
            PolicyKind::Plan => plan::Settings::parse(s, version).map(PolicySpec::Plan),
        }
    }

    /// Which policy it is.
    pub fn kind(&self) -> PolicyKind {
        match self {
            PolicySpec::Native(_) => PolicyKind::Native,
            PolicySpec::Direct(_) => PolicyKind::Direct,
            PolicySpec::Bfc(_) => PolicyKind::Bfc,
            PolicySpec::Async(_) => PolicyKind::Async,
            PolicySpec::Stitch(_) => PolicyKind::Stitch,
            PolicySpec::Plan(_) => PolicyKind::Plan,
        }
    }

    /// The policy's name (`native`, `bfc`, …).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The canonical settings string, with only the keys that differ from
    /// the policy's defaults (empty for defaults).
    pub fn settings(&self) -> String {
        match self {
            PolicySpec::Native(c) => c.to_string(),
            PolicySpec::Direct(c) => {
                non_default(&c.to_string(), &direct::Settings::default().to_string())
            }
            PolicySpec::Bfc(c) => {
                non_default(&c.to_string(), &bfc::Settings::default().to_string())
            }
            PolicySpec::Async(c) => {
                non_default(&c.to_string(), &async_pool::Settings::default().to_string())
            }
            PolicySpec::Stitch(c) => {
                non_default(&c.to_string(), &stitch::Settings::default().to_string())
            }
            PolicySpec::Plan(c) => c.to_string(),
        }
    }

    /// The native policy's settings, if this is the native policy.
    pub fn native_conf(&self) -> Option<&AllocConf> {
        match self {
            PolicySpec::Native(c) => Some(c),
            _ => None,
        }
    }
}

/// The `key:value` items of `full` that are not in `defaults`.
fn non_default(full: &str, defaults: &str) -> String {
    let d: Vec<&str> = defaults.split(',').collect();
    full.split(',')
        .filter(|item| !item.is_empty() && !d.contains(item))
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for PolicySpec {
    /// `expandable_segments:True` or `default` for the native policy;
    /// `bfc`, `bfc(allow_growth:true)` for the others.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.settings();
        match (self, s.is_empty()) {
            (PolicySpec::Native(_), true) => write!(f, "default"),
            (PolicySpec::Native(_), false) => write!(f, "{s}"),
            (_, true) => write!(f, "{}", self.name()),
            (_, false) => write!(f, "{}({s})", self.name()),
        }
    }
}

/// Runs `$body` with `$a` bound to the allocator a spec describes, built
/// over `$dev`. Every policy is a different type, so the replay code is
/// monomorphised once per policy.
#[macro_export]
macro_rules! with_policy {
    ($spec:expr, $dev:expr, |$a:ident| $body:expr) => {
        match $spec {
            $crate::PolicySpec::Native(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::NativeAllocator::new(c.clone(), $dev);
                $body
            }
            $crate::PolicySpec::Direct(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::policies::DirectAllocator::new(c.clone(), $dev);
                $body
            }
            $crate::PolicySpec::Bfc(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::policies::BfcAllocator::new(c.clone(), $dev);
                $body
            }
            $crate::PolicySpec::Async(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::policies::AsyncPoolAllocator::new(c.clone(), $dev);
                $body
            }
            $crate::PolicySpec::Stitch(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::policies::StitchAllocator::new(c.clone(), $dev);
                $body
            }
            $crate::PolicySpec::Plan(c) => {
                #[allow(unused_mut)]
                let mut $a = $crate::policies::PlanAllocator::new(c.clone(), $dev);
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_only_non_default_settings() {
        let v = TorchVersion::NEWEST;
        assert_eq!(
            PolicySpec::parse("native", "", v).unwrap().to_string(),
            "default"
        );
        assert_eq!(
            PolicySpec::parse("native", "expandable_segments:True", v)
                .unwrap()
                .to_string(),
            "expandable_segments:True"
        );
        assert_eq!(PolicySpec::parse("bfc", "", v).unwrap().to_string(), "bfc");
        let b = PolicySpec::parse("bfc", "allow_growth:true", v).unwrap();
        assert_eq!(b.to_string(), "bfc(allow_growth:true)");
        assert_eq!(PolicySpec::parse("bfc", &b.settings(), v).unwrap(), b);
        assert!(
            PolicySpec::parse("tlsf", "", v)
                .unwrap_err()
                .contains("unknown policy 'tlsf'")
        );
        assert!(PolicySpec::parse("bfc", "allow_growth:maybe", v).is_err());
    }
}
