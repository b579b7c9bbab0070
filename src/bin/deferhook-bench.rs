//! `deferhook-bench`: drives a real `deferhook` process with load and measures it
//! (issue #8, BENCHMARKS.md). The modules live in `src/bench/`, outside the library.

#[path = "../bench/mod.rs"]
mod bench;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    bench::main().await
}
