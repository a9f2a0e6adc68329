//! Reading recordings for the generator: native CSV traces, plain or
//! gzip-compressed, with the recorder's phase marks and parameters.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use flate2::read::GzDecoder;

use vramlab_traces::{Location, Trace, TraceError, read_csv};

/// A recorded trace with what the generator needs besides the events.
#[derive(Debug, Clone)]
pub struct Recording {
    /// File name (used in messages).
    pub name: String,
    /// The events and header.
    pub trace: Trace,
    /// `# phase: LABEL` comments among the events, as (index of the next
    /// event, label).
    pub phases: Vec<(usize, String)>,
    /// `# param.KEY: value` header lines (the recorder's workload
    /// parameters), keys without the `param.` prefix.
    pub params: BTreeMap<String, String>,
}

impl Recording {
    /// The integer parameter `key`, if present and numeric.
    pub(crate) fn param_u64(&self, key: &str) -> Option<u64> {
        self.params.get(key).and_then(|v| v.parse().ok())
    }

    /// The recorder's workload name (`# workload:` header line).
    #[cfg(test)]
    pub(crate) fn workload(&self) -> Option<&str> {
        self.trace.header.extra.get("workload").map(String::as_str)
    }
}

/// True when `bytes` start with the gzip magic number.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Decompresses gzip data; `name` is used in messages.
pub(crate) fn gunzip(bytes: &[u8], name: &str) -> Result<Vec<u8>, TraceError> {
    let mut out = Vec::with_capacity(bytes.len() * 8);
    GzDecoder::new(bytes).read_to_end(&mut out).map_err(|e| {
        TraceError::new(name, Location::File, format!("cannot decompress gzip: {e}"))
    })?;
    Ok(out)
}

/// Reads a recording from the bytes of a `.csv` or `.csv.gz` file (gzip is
/// recognised by its magic number).
pub fn read_recording_bytes(bytes: &[u8], name: &str) -> Result<Recording, TraceError> {
    let owned;
    let text: &[u8] = if is_gzip(bytes) {
        owned = gunzip(bytes, name)?;
        &owned
    } else {
        bytes
    };
    let trace = read_csv(text, name)?;
    // `read_csv` accepted the text, so it is UTF-8 (it checks every line).
    let text = std::str::from_utf8(text)
        .map_err(|e| TraceError::new(name, Location::File, format!("not UTF-8 text: {e}")))?;
    let mut phases = Vec::new();
    let mut seen_header = false;
    let mut events = 0usize;
    // Blank, comment and event lines exactly as `read_csv` tells them apart
    // (it trims Unicode whitespace), so that the marks count its events.
    for line in text.split('\n') {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            if seen_header {
                if let Some(label) = c.trim_ascii().strip_prefix("phase:") {
                    phases.push((events, label.trim_ascii().to_string()));
                }
            }
            continue;
        }
        if seen_header {
            events += 1;
        } else {
            seen_header = true;
        }
    }
    let params = trace
        .header
        .extra
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("param.").map(|k| (k.to_string(), v.clone())))
        .collect();
    Ok(Recording {
        name: name.to_string(),
        trace,
        phases,
        params,
    })
}

/// Reads a recording from a `.csv` or `.csv.gz` file.
pub(crate) fn read_recording(path: &Path) -> Result<Recording, TraceError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| TraceError::new(&name, Location::File, format!("cannot open: {e}")))?;
    read_recording_bytes(&bytes, &name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::GzEncoder;
    use std::io::Write;

    const TEXT: &str = "# vramlab trace v1\n# workload: w\n# param.seq: 512\n# param.attention: flash\naction,id,size,stream\n# phase: build\nalloc,0,10,0\nalloc,1,20,0\n# phase: step 0\nfree,0,,\nfree,1,,\n";

    #[test]
    fn reads_phases_and_params_plain_and_gz() {
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(TEXT.as_bytes()).unwrap();
        let gz = gz.finish().unwrap();
        for bytes in [TEXT.as_bytes().to_vec(), gz] {
            let r = read_recording_bytes(&bytes, "t.csv").unwrap();
            assert_eq!(r.trace.events.len(), 4);
            assert_eq!(r.phases, vec![(0, "build".into()), (2, "step 0".into())]);
            assert_eq!(r.param_u64("seq"), Some(512));
            assert_eq!(r.params["attention"], "flash");
            assert_eq!(r.workload(), Some("w"));
        }
    }

    #[test]
    fn errors_name_the_file() {
        let e = read_recording_bytes(&[0x1f, 0x8b, 1, 2, 3], "bad.csv.gz").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.csv.gz: cannot decompress gzip"),
            "{e}"
        );
        let e = read_recording_bytes(b"action,id,size,stream\nfree,x\n", "f.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.csv:2: free of id 'x', which is not allocated"
        );
    }
}
