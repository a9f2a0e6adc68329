//! Settings parsers: `AllocConf::parse` under every modelled release and
//! each policy's `Config::parse`. Never panic; what parses prints a
//! canonical string that parses back to the same settings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vramlab_allocator::AllocConf;
use vramlab_allocator::native::rounding::{allocation_size, round_size};
use vramlab_allocator::policies::{async_pool, bfc, direct, stitch};

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    for v in vramlab_fuzz::versions() {
        let Ok(c) = AllocConf::parse(&s, v) else {
            continue;
        };
        let _ = c.effective_rows();
        let _ = c.warnings();
        let printed = c.to_string();
        let mut back = AllocConf::parse(&printed, v).unwrap_or_else(|e| {
            panic!("{v}: '{printed}' (printed from '{s}') does not parse: {e}")
        });
        back.raw = c.raw.clone();
        assert_eq!(
            back, c,
            "{v}: '{s}' prints as '{printed}', which parses differently"
        );
        let _ = c.parse_update(&s);
        for n in [
            1u64,
            511,
            513,
            1 << 20,
            (1 << 20) + 1,
            10 << 20,
            (1 << 40) + 3,
            (1 << 60) - 1,
        ] {
            let r = round_size(&c, n);
            assert!(r >= n && r % 512 == 0, "{v} '{s}': round_size({n}) = {r}");
            let a = allocation_size(&c, r);
            assert!(a >= r, "{v} '{s}': allocation_size({r}) = {a}");
        }
    }
    if let Ok(c) = direct::Config::parse(&s) {
        assert_eq!(direct::Config::parse(&c.to_string()), Ok(c));
    }
    if let Ok(c) = bfc::Config::parse(&s) {
        let p = c.to_string();
        assert_eq!(bfc::Config::parse(&p), Ok(c), "bfc '{s}' prints as '{p}'");
    }
    if let Ok(c) = async_pool::Config::parse(&s) {
        let p = c.to_string();
        assert_eq!(
            async_pool::Config::parse(&p),
            Ok(c),
            "async '{s}' prints as '{p}'"
        );
    }
    if let Ok(c) = stitch::Config::parse(&s) {
        let p = c.to_string();
        assert_eq!(
            stitch::Config::parse(&p),
            Ok(c),
            "stitch '{s}' prints as '{p}'"
        );
    }
});
