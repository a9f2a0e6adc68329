//! vramlab-sim: the simulated GPU and the replay engine.

#![warn(missing_docs)]
