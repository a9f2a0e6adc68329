//! A generated workload's knobs as messages advise them (`--seq 4096`
//! on the command line, `seq=4096` in Python): options of this crate's
//! front-end commands (`gen`, `fit`, `matrix`), spelled by
//! `vramlab_traces::advice` like the options of every command.

use vramlab_traces::advice::OptionName;

/// A knob of a generated workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadOpt {
    /// A generated workload's sequence length.
    Seq,
    /// A generated workload's image side.
    Resolution,
    /// A generated workload's batch size.
    Batch,
    /// A generated workload's training or denoising steps.
    Steps,
    /// A generated workload's number of new tokens (generation presets).
    NewTokens,
    /// A generated workload's numeric precision.
    Precision,
    /// A generated workload's attention kernel.
    Attention,
    /// Activation checkpointing in a generated workload.
    Checkpointing,
    /// A generated workload's KV cache kind.
    KvCache,
    /// A generated workload's model size.
    Size,
    /// VAE tiling in a generated diffusion workload.
    VaeTiling,
    /// VAE slicing in a generated diffusion workload.
    VaeSlicing,
    /// Model offload in a generated diffusion workload.
    Offload,
    /// The leak of the gpt-small workload.
    Leak,
    /// `empty_cache()` after each step of the gpt-small workload.
    EmptyCache,
}

impl WorkloadOpt {
    /// Every knob.
    pub const ALL: [WorkloadOpt; 15] = [
        WorkloadOpt::Seq,
        WorkloadOpt::Resolution,
        WorkloadOpt::Batch,
        WorkloadOpt::Steps,
        WorkloadOpt::NewTokens,
        WorkloadOpt::Precision,
        WorkloadOpt::Attention,
        WorkloadOpt::Checkpointing,
        WorkloadOpt::KvCache,
        WorkloadOpt::Size,
        WorkloadOpt::VaeTiling,
        WorkloadOpt::VaeSlicing,
        WorkloadOpt::Offload,
        WorkloadOpt::Leak,
        WorkloadOpt::EmptyCache,
    ];

    /// The knob whose parameter (and Python keyword) is `name`
    /// (`vae_tiling` → [`WorkloadOpt::VaeTiling`]).
    pub fn of_param(name: &str) -> Option<WorkloadOpt> {
        WorkloadOpt::ALL
            .into_iter()
            .find(|k| k.python_name() == Some(name))
    }
}

impl OptionName for WorkloadOpt {
    fn cli_name(self) -> &'static str {
        match self {
            WorkloadOpt::Seq => "seq",
            WorkloadOpt::Resolution => "resolution",
            WorkloadOpt::Batch => "batch",
            WorkloadOpt::Steps => "steps",
            WorkloadOpt::NewTokens => "new-tokens",
            WorkloadOpt::Precision => "precision",
            WorkloadOpt::Attention => "attention",
            WorkloadOpt::Checkpointing => "checkpointing",
            WorkloadOpt::KvCache => "kv-cache",
            WorkloadOpt::Size => "size",
            WorkloadOpt::VaeTiling => "vae-tiling",
            WorkloadOpt::VaeSlicing => "vae-slicing",
            WorkloadOpt::Offload => "offload",
            WorkloadOpt::Leak => "leak",
            WorkloadOpt::EmptyCache => "empty-cache",
        }
    }

    fn python_name(self) -> Option<&'static str> {
        Some(match self {
            WorkloadOpt::Seq => "seq",
            WorkloadOpt::Resolution => "resolution",
            WorkloadOpt::Batch => "batch",
            WorkloadOpt::Steps => "steps",
            WorkloadOpt::NewTokens => "new_tokens",
            WorkloadOpt::Precision => "precision",
            WorkloadOpt::Attention => "attention",
            WorkloadOpt::Checkpointing => "checkpointing",
            WorkloadOpt::KvCache => "kv_cache",
            WorkloadOpt::Size => "size",
            WorkloadOpt::VaeTiling => "vae_tiling",
            WorkloadOpt::VaeSlicing => "vae_slicing",
            WorkloadOpt::Offload => "offload",
            WorkloadOpt::Leak => "leak",
            WorkloadOpt::EmptyCache => "empty_cache",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramlab_traces::advice::Spelling;

    #[test]
    fn knobs_are_named_by_their_parameters() {
        assert_eq!(
            WorkloadOpt::of_param("vae_tiling"),
            Some(WorkloadOpt::VaeTiling)
        );
        assert_eq!(
            WorkloadOpt::of_param("kv_cache"),
            Some(WorkloadOpt::KvCache)
        );
        assert_eq!(WorkloadOpt::of_param("device"), None);
        for k in WorkloadOpt::ALL {
            assert_eq!(
                k.python_name(),
                Some(k.cli_name().replace('-', "_").as_str())
            );
        }
    }

    #[test]
    fn each_front_end_spells_a_knob_its_way() {
        let python = Spelling::Python;
        assert_eq!(
            WorkloadOpt::Batch
                .with_number(4)
                .spelled(Spelling::Cli)
                .to_string(),
            "--batch 4"
        );
        assert_eq!(
            WorkloadOpt::Batch
                .with_number(4)
                .spelled(python)
                .to_string(),
            "batch=4"
        );
        assert_eq!(
            WorkloadOpt::Leak.on().spelled(Spelling::Cli).to_string(),
            "--leak"
        );
        assert_eq!(
            WorkloadOpt::Leak.on().spelled(python).to_string(),
            "leak=True"
        );
        assert_eq!(
            WorkloadOpt::VaeTiling.bare().spelled(python).to_string(),
            "vae_tiling="
        );
    }
}
