//! A snapshot's fidelity check as `vramlab fidelity --json` prints it.

use serde::Serialize;

use crate::analysis::fidelity::FidelityReport;

/// Every checked device of a snapshot and their total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FidelityOutcome {
    /// The snapshot's path.
    pub snapshot: String,
    /// Every device (and the total) matched.
    pub exact: bool,
    /// One report per checked device.
    pub devices: Vec<FidelityReport>,
    /// The devices' figures added up (the first device's settings).
    #[serde(flatten)]
    pub total: FidelityReport,
}

impl FidelityOutcome {
    /// The outcome of `devices`, the reports of `snapshot`'s devices
    /// (`None` when there are none).
    pub fn new(snapshot: &str, devices: Vec<FidelityReport>) -> Option<Self> {
        let first = devices.first()?;
        let mut total = FidelityReport {
            conf: first.conf.clone(),
            ..Default::default()
        };
        for r in &devices {
            total.add(r);
        }
        Some(FidelityOutcome {
            snapshot: snapshot.to_string(),
            exact: total.is_exact() && devices.iter().all(FidelityReport::is_exact),
            devices,
            total,
        })
    }

    /// Every device matched the recording.
    pub fn devices_exact(&self) -> bool {
        self.devices.iter().all(FidelityReport::is_exact)
    }
}
