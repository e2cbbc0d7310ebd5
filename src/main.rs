use std::process::ExitCode;

/// mimalloc: the simulator allocates many small strings (wire messages);
/// the system allocator spent a third of the run time on them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    herdsim::cli::main()
}
