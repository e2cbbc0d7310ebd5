use std::process::ExitCode;

/// mimalloc: the simulator allocates many small strings (wire messages);
/// the system allocator spent a third of the run time on them. Through
/// `herdsim::allocator`, which asks mimalloc for an alignment only where
/// an allocation needs one (see there).
#[global_allocator]
static GLOBAL: herdsim::allocator::Mimalloc = herdsim::allocator::Mimalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (the same index in
/// its v2 and v3; `libmimalloc-sys` names only some of the options).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> ExitCode {
    // mimalloc hands memory freed by the program back to the OS 10 ms
    // after it was last used. A channel of thousands of agents frees and
    // takes back megabytes of event buckets every few milliseconds, so it
    // went back and forth, and the kernel zeroed every page again: 0.1 to
    // 0.5 s of system time in a 2 s run of 10 000 agents. One second keeps
    // what a run reuses and still returns a burst's memory to the OS (for
    // `serve`) soon after. MIMALLOC_PURGE_DELAY is overridden.
    // SAFETY: mi_option_set stores an integer in mimalloc's option table;
    // this runs first in main, before any thread exists.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000) };
    herdsim::cli::main()
}
