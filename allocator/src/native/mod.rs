//! PyTorch native caching allocator (in progress).
