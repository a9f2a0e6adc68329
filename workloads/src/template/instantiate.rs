//! Instantiation: evaluating every size at a batch and scaling value and
//! emitting the events, allocations renamed densely, the last step
//! repeated for `--steps` (see `steps`), the last decode step for
//! `--new-tokens` (see `decode`).

use std::ops::Range;

use crate::GenError;
use vramlab_traces::advice::OptionName;

use crate::opt::WorkloadOpt;
use vramlab_traces::{AllocId, Event, Trace, TraceHeader};

use super::decode::Decode;
use super::items::PerItem;
use super::steps::Repeat;
use super::{Presence, TEvent, Template};

impl Template {
    /// Generates the trace at batch `batch` and scaling value `value`.
    ///
    /// `steps`, for workloads recorded with two or more steps, repeats the
    /// last recorded step until there are `steps` of them: every
    /// allocation that a step leaves to the next (latents, accumulated
    /// state) is paired with the one the previous step left, by size
    /// function; a request for fewer steps than recorded is refused.
    pub fn instantiate(
        &self,
        batch: u64,
        value: u64,
        steps: Option<u32>,
    ) -> Result<Trace, GenError> {
        self.instantiate_with(batch, value, steps, None)
    }

    /// [`Template::instantiate`], and for generation workloads
    /// `new_tokens` in all: the last recorded decode step is repeated with
    /// its sizes one token further on each time (see the `decode` module
    /// for what is checked first); fewer (at least 3) stop it early.
    pub(crate) fn instantiate_with(
        &self,
        batch: u64,
        value: u64,
        steps: Option<u32>,
        new_tokens: Option<u64>,
    ) -> Result<Trace, GenError> {
        self.instantiate_full(batch, value, steps, new_tokens, None)
    }

    /// [`Template::instantiate`] for work done once per item of the batch
    /// in phase `phase` (diffusers' VAE slicing: `vae decode`): beyond the
    /// recorded batches, the second item's block is repeated (see the
    /// `items` module).
    pub(crate) fn instantiate_per_item(
        &self,
        batch: u64,
        value: u64,
        phase: &str,
    ) -> Result<Trace, GenError> {
        self.instantiate_full(batch, value, None, None, Some(phase))
    }

    fn instantiate_full(
        &self,
        batch: u64,
        value: u64,
        steps: Option<u32>,
        new_tokens: Option<u64>,
        per_item: Option<&str>,
    ) -> Result<Trace, GenError> {
        if batch == 0 {
            return Err(
                self.request_error(format!("{} must be at least 1", WorkloadOpt::Batch.bare()))
            );
        }
        if batch != self.base_batch && self.other_batch.is_none() {
            return Err(self.request_error(format!(
                "recorded at batch {} only; {} needs a recording at another batch size",
                self.base_batch,
                WorkloadOpt::Batch.with_number(batch)
            )));
        }
        let x = self
            .scaling
            .variable(value)
            .map_err(|m| self.request_error(m))?;
        let base = batch == self.base_batch;
        let ev_present: Vec<bool> = self.presence.iter().map(|&p| here(p, base)).collect();
        let present: Vec<bool> = self.allocs.iter().map(|a| here(a.presence, base)).collect();
        let sizes: Vec<u64> = self
            .allocs
            .iter()
            .zip(&present)
            .map(|(a, &p)| if p { a.size.eval(batch, x) } else { 0 })
            .collect();
        let repeat = self.plan_repeat(steps, &present, &ev_present, &sizes)?;
        let decode = self.plan_decode(new_tokens, batch, x, &present, &ev_present)?;
        let items = self.plan_per_item(per_item, batch, x, &present, &ev_present)?;
        if repeat.is_some() && decode.is_some() {
            return Err(self.request_error(format!(
                "{} and {} together",
                WorkloadOpt::Steps.bare(),
                WorkloadOpt::NewTokens.bare()
            )));
        }
        let times = |start: usize, end: usize, n: u64| {
            usize::try_from(n)
                .ok()
                .and_then(|n| end.saturating_sub(start).checked_mul(n))
        };
        let extra = match (&repeat, &decode, &items) {
            (Some(r), _, _) => times(r.start, r.end, u64::from(r.extra)),
            (_, Some(d), _) => times(d.start, d.end, d.extra),
            (_, _, Some(p)) => times(p.start, p.end, p.extra),
            _ => Some(0),
        };
        let mut emitter = Emitter {
            template: self,
            present: &present,
            ev_present: &ev_present,
            sizes,
            out: self.reserve_events(
                extra,
                if decode.is_some() {
                    WorkloadOpt::NewTokens
                } else {
                    WorkloadOpt::Steps
                },
            )?,
            id_of: vec![0 as AllocId; self.allocs.len()],
            earlier: Vec::new(),
            next: 0,
        };
        match (&decode, &items) {
            (Some(d), _) => emitter.emit_decode(d, batch, x)?,
            (_, Some(p)) => emitter.emit_per_item(p)?,
            _ => emitter.emit_all(repeat.as_ref())?,
        }
        let mut header = self.header_at(batch, value, steps);
        if let Some(n) = new_tokens {
            header
                .extra
                .insert("param.new_tokens".into(), n.to_string());
            header.source = header.source.replacen(
                &format!("--{} {value}", self.scaling.param()),
                &format!("--{} {value} --new-tokens {n}", self.scaling.param()),
                1,
            );
        }
        let mut trace = Trace::new(header);
        trace.streams = self.streams.clone();
        trace.events = emitter.out;
        trace.num_ids = emitter.next;
        Ok(trace)
    }

    /// An error about a request for this template (names it).
    pub(super) fn request_error(&self, m: String) -> GenError {
        GenError::Request(format!("{}: {m}", self.name))
    }

    /// Room for the events to generate (`extra` beyond the template's):
    /// ids are 32-bit, and the memory is reserved up front, so a huge
    /// --steps or --new-tokens is an error, not an abort.
    fn reserve_events(
        &self,
        extra: Option<usize>,
        option: WorkloadOpt,
    ) -> Result<Vec<Event>, GenError> {
        let total = extra
            .and_then(|extra| extra.checked_add(self.events.len()))
            .filter(|&t| t <= u32::MAX as usize)
            .ok_or_else(|| {
                self.request_error(format!("{}: more than 4294967295 events", option.bare()))
            })?;
        let mut out = Vec::new();
        out.try_reserve_exact(total).map_err(|_| {
            self.request_error(format!(
                "{}: {total} events ({} bytes) do not fit in memory",
                option.bare(),
                total.saturating_mul(std::mem::size_of::<Event>())
            ))
        })?;
        Ok(out)
    }

    /// The generated trace's header: the template's recorded header with
    /// the parameters of this instance and the generator's provenance.
    fn header_at(&self, batch: u64, value: u64, steps: Option<u32>) -> TraceHeader {
        let mut header = self.header.clone();
        header.extra.retain(|k, _| {
            !(k.starts_with("param.")
                || matches!(
                    k.as_str(),
                    "events" | "allocs" | "peak_live_bytes" | "command" | "source"
                ))
        });
        for (k, v) in &self.header.extra {
            if let Some(p) = k.strip_prefix("param.") {
                if p != "batch" && p != self.scaling.param() && p != "steps" {
                    header.extra.insert(k.clone(), v.clone());
                }
            }
        }
        header.extra.insert("param.batch".into(), batch.to_string());
        header
            .extra
            .insert(format!("param.{}", self.scaling.param()), value.to_string());
        if let Some(s) = steps {
            header.extra.insert("param.steps".into(), s.to_string());
        }
        header.extra.insert(
            "generator".into(),
            format!("vramlab gen (template {})", self.name),
        );
        header
            .extra
            .insert("template_sources".into(), self.sources.join(" "));
        header.source = format!(
            "vramlab gen {} --batch {batch} --{} {value}{}: generated from recordings at {} {}",
            self.name,
            self.scaling.param(),
            steps.map_or(String::new(), |s| format!(" --steps {s}")),
            self.scaling.param(),
            self.values
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        header
    }
}

/// Whether what has presence `p` happens at the base batch (`base`) or at
/// another.
fn here(p: Presence, base: bool) -> bool {
    match p {
        Presence::Always => true,
        Presence::BaseBatchOnly => base,
        Presence::OtherBatchOnly => !base,
    }
}

/// Emits a template's events at one batch and value.
struct Emitter<'t> {
    template: &'t Template,
    /// Per template allocation: whether it exists at this batch.
    present: &'t [bool],
    /// Per template event: whether it happens at this batch.
    ev_present: &'t [bool],
    /// Per template allocation: its size here.
    sizes: Vec<u64>,
    out: Vec<Event>,
    /// Per template allocation: the id it was last emitted with.
    id_of: Vec<AllocId>,
    /// Accumulating allocations (see `Repeat::accumulated`): (template
    /// allocation, the ids of its earlier repetitions), freed after the
    /// last one's, newest first (as a Python list releases its items).
    earlier: Vec<(u32, Vec<AllocId>)>,
    /// The next id to give.
    next: AllocId,
}

impl Emitter<'_> {
    /// All events, the last recorded step repeated as `repeat` says.
    // Indexing: `id_of` has one entry per template allocation, and the
    // carry pairs are template allocations (see `carry_pairs`).
    #[allow(clippy::indexing_slicing)]
    fn emit_all(&mut self, repeat: Option<&Repeat>) -> Result<(), GenError> {
        let len = self.template.events.len();
        match repeat {
            None => self.emit(0..len, &[])?,
            Some(r) => {
                self.emit(0..r.start, &[])?;
                // The recorded last step, then n more; what the steps leave
                // to each other is renamed, what came from before the steps
                // is freed in the last one only.
                self.earlier = r.accumulated.iter().map(|&a| (a, Vec::new())).collect();
                for j in 0..=r.extra {
                    if j > 0 {
                        for &(c, p) in &r.pairs {
                            self.id_of[c as usize] = self.id_of[p as usize];
                        }
                        for (a, ids) in &mut self.earlier {
                            ids.push(self.id_of[*a as usize]);
                        }
                    }
                    let skip: &[bool] = if j < r.extra { r.once.as_slice() } else { &[] };
                    self.emit(r.start..r.end, skip)?;
                }
                self.emit(r.end..len, &[])?;
            }
        }
        Ok(())
    }

    /// All events, the second item's block repeated for every item beyond
    /// it, with the first item's sizes; what each block leaves behind
    /// accumulates (see `items`).
    // Indexing: `sizes` and `id_of` have one entry per template allocation,
    // and `like` and `accumulated` are template allocations.
    #[allow(clippy::indexing_slicing)]
    fn emit_per_item(&mut self, p: &PerItem) -> Result<(), GenError> {
        for &(b, a) in &p.like {
            self.sizes[b as usize] = self.sizes[a as usize];
        }
        self.emit(0..p.end, &[])?;
        self.earlier = p.accumulated.iter().map(|&a| (a, Vec::new())).collect();
        for _ in 0..p.extra {
            for (a, ids) in &mut self.earlier {
                ids.push(self.id_of[*a as usize]);
            }
            self.emit(p.start..p.end, &[])?;
        }
        self.emit(p.end..self.template.events.len(), &[])
    }

    /// All events, the last recorded decode step repeated `d.extra` more
    /// times, each time one token further on: what the step before left
    /// is freed under the name the previous repetition gave it.
    // Indexing: `id_of` and `sizes` have one entry per template
    // allocation, and the pairs and `made` are template allocations.
    #[allow(clippy::indexing_slicing)]
    fn emit_decode(&mut self, d: &Decode, batch: u64, x: i128) -> Result<(), GenError> {
        let t = self.template;
        if d.truncated {
            self.emit(0..d.start, &[])?;
            for &(last, kept) in &d.pairs {
                self.id_of[last as usize] = self.id_of[kept as usize];
            }
            return self.emit(d.end..t.events.len(), &[]);
        }
        self.emit(0..d.end, &[])?;
        for k in 1..=d.extra {
            for &(c, p) in &d.pairs {
                self.id_of[c as usize] = self.id_of[p as usize];
            }
            let xk = x.saturating_add(k as i128);
            for &a in &d.made {
                self.sizes[a as usize] = t.allocs[a as usize].size.eval(batch, xk);
            }
            self.emit(d.start..d.end, &[])?;
        }
        self.emit(d.end..t.events.len(), &[])
    }

    /// The events in `range` that happen at this batch, but for the frees
    /// of allocations marked in `skip_frees`.
    // Indexing: `present`, `sizes` and `id_of` have one entry per template
    // allocation, as does `template.allocs`; every allocation an event
    // names is one (T1).
    #[allow(clippy::indexing_slicing)]
    fn emit(&mut self, range: Range<usize>, skip_frees: &[bool]) -> Result<(), GenError> {
        let t = self.template;
        // Phase positions are in order and within the events (T2, T3).
        let (Some(evs), Some(evs_present)) = (
            t.events.get(range.clone()),
            self.ev_present.get(range.clone()),
        ) else {
            return Err(t.request_error(format!(
                "internal error: events {range:?} are not in the template"
            )));
        };
        let present = self.present;
        for (ev, &on) in evs.iter().zip(evs_present) {
            if !on {
                continue;
            }
            if let TEvent::Free(a) | TEvent::FreeRequested(a) | TEvent::FreeCompleted(a) = *ev {
                if skip_frees.get(a as usize).copied().unwrap_or(false) {
                    continue;
                }
            }
            let e = match *ev {
                TEvent::Alloc(a) => {
                    if !present[a as usize] {
                        continue;
                    }
                    let id = self.next;
                    self.next = self.next.checked_add(1).ok_or_else(|| {
                        GenError::Request("more than 4294967295 allocations".into())
                    })?;
                    self.id_of[a as usize] = id;
                    Event::Alloc {
                        id,
                        stream: t.allocs[a as usize].stream,
                        size: self.sizes[a as usize],
                    }
                }
                TEvent::Free(a) if present[a as usize] => {
                    if let Some((_, ids)) = self.earlier.iter().find(|(t, _)| *t == a) {
                        self.out.push(Event::Free {
                            id: self.id_of[a as usize],
                        });
                        for &id in ids.iter().rev() {
                            self.out.push(Event::Free { id });
                        }
                        continue;
                    }
                    Event::Free {
                        id: self.id_of[a as usize],
                    }
                }
                TEvent::FreeRequested(a) if present[a as usize] => Event::FreeRequested {
                    id: self.id_of[a as usize],
                },
                TEvent::FreeCompleted(a) if present[a as usize] => Event::FreeCompleted {
                    id: self.id_of[a as usize],
                },
                TEvent::EmptyCache => Event::EmptyCache,
                _ => continue,
            };
            self.out.push(e);
        }
        Ok(())
    }
}
