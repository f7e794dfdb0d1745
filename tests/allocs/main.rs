//! The tests that count heap allocations, one binary with one counting
//! global allocator (a binary has one): the `Balance` request path
//! (`alloc`), the hash pickers (`hash_pickers`), load reports
//! (`orca_alloc`) and the retry layer (`retry`). Counts are per thread, so
//! the tests run in parallel as in any other binary; the other tests
//! share `tests/it/`.

mod counting;

mod alloc;
mod hash_pickers;
mod orca_alloc;
mod retry;
