"""vramlab_record: record PyTorch GPU allocation traces for vramlab.

* ``python -m vramlab_record.gpu``: on a GPU, PyTorch's own memory history
  (``_record_memory_history`` + ``_dump_snapshot``) around a script or a
  built-in workload.
* ``python -m vramlab_record.cpu``: without a GPU, the same event stream
  from fake tensors (:mod:`vramlab_record.fake`) and a dispatch-mode
  recorder (:mod:`vramlab_record.recorder`).
* ``python -m vramlab_record.corpus``: re-records ``workloads/data``.
* ``python -m vramlab_record.compare``: a recording against a real snapshot.

In your own code::

    from vramlab_record import fake_recording
    with fake_recording() as rec:
        model = build()          # on device "cpu": fake, no memory
        train_step(model)
    rec.rec.write("mine.csv")
"""

__all__ = ["AllocationRecorder", "Recording", "finish", "fake_recording"]


def __getattr__(name):
    # Imported lazily: the recorder needs torch, the comparison tool does not
    # (`python -m vramlab_record.compare` runs without torch).
    if name in ("AllocationRecorder", "Recording", "finish"):
        from . import recorder

        return getattr(recorder, name)
    raise AttributeError(f"module 'vramlab_record' has no attribute {name!r}")


def fake_recording(recording=None, **kwargs):
    """See :func:`vramlab_record.fake.fake_recording` (imported lazily)."""
    from .fake import fake_recording as f

    return f(recording, **kwargs)
