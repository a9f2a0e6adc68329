//! The recorded corpus, compiled in: `data/*.csv.gz` and the
//! manifest that describes them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

#[path = "corpus_files.rs"]
mod files;

/// `data/MANIFEST.tsv`: one line per file (file, family, workload,
/// params, events, allocs, peak_live_bytes, versions, command).
pub(crate) const MANIFEST: &str = include_str!("../data/MANIFEST.tsv");

/// One recording of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusEntry {
    /// File name in `data/`.
    pub file: &'static str,
    /// Workload family (workload + variant), e.g. `llama-3-8b-train-ckpt`.
    pub family: &'static str,
    /// The recorder's workload name.
    pub workload: &'static str,
    /// The recorder's parameters (`seq`, `batch`, `attention`, ...).
    pub params: BTreeMap<String, String>,
    /// Allocator events, allocations and peak live bytes, as the manifest
    /// records them.
    pub events: u64,
    /// Allocations.
    pub allocs: u64,
    /// Peak of live requested bytes.
    pub peak_live_bytes: u64,
    /// The file's bytes (gzip-compressed CSV).
    pub bytes: &'static [u8],
}

/// The corpus files listed in the manifest that are compiled in, in
/// manifest order. Manifest lines without an embedded file (the legacy
/// plain CSV) are left out.
pub fn corpus() -> &'static [CorpusEntry] {
    static CORPUS: OnceLock<Vec<CorpusEntry>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut lines = MANIFEST.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
        let col = |name: &str| header.iter().position(|h| *h == name);
        let (Some(cf), Some(cfam), Some(cw), Some(cp)) =
            (col("file"), col("family"), col("workload"), col("params"))
        else {
            return Vec::new();
        };
        let num = |cols: &[&str], name: &str| -> u64 {
            col(name)
                .and_then(|i| cols.get(i))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let mut out = Vec::new();
        for line in lines {
            let cols: Vec<&'static str> = line.split('\t').collect();
            let Some(&file) = cols.get(cf) else { continue };
            let Some(&(_, bytes)) = files::FILES.iter().find(|(n, _)| *n == file) else {
                continue;
            };
            let params = cols
                .get(cp)
                .unwrap_or(&"")
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            out.push(CorpusEntry {
                file,
                family: cols.get(cfam).copied().unwrap_or(""),
                workload: cols.get(cw).copied().unwrap_or(""),
                params,
                events: num(&cols, "events"),
                allocs: num(&cols, "allocs"),
                peak_live_bytes: num(&cols, "peak_live_bytes"),
                bytes,
            });
        }
        out
    })
}

/// Names of the compiled-in files (for consistency checks).
#[cfg(test)]
pub(crate) fn embedded_files() -> impl Iterator<Item = &'static str> {
    files::FILES.iter().map(|(n, _)| *n)
}
