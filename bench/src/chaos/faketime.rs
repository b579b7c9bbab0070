//! Where libfaketime is installed: the soak's skewed instance and
//! `tests/delivery/black_box_clocks.rs` (which includes this file) preload it.

use std::path::PathBuf;

/// libfaketime's library: `DEFERHOOK_LIBFAKETIME` when set (then only it: a wrong
/// path is not papered over by another library), else Debian's multiarch
/// `/usr/lib/<triple>/faketime/libfaketime.so.1`, else `/usr/lib/faketime`,
/// `/usr/lib64/faketime` or `/usr/local/lib/faketime`; `None` when none is a file
/// (Debian: `apt-get install faketime`).
pub fn library() -> Option<PathBuf> {
    if let Some(named) = std::env::var_os("DEFERHOOK_LIBFAKETIME") {
        return Some(PathBuf::from(named)).filter(|path| path.is_file());
    }
    let multiarch = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|dir| dir.path().join("faketime/libfaketime.so.1"));
    let others = [
        "/usr/lib/faketime",
        "/usr/lib64/faketime",
        "/usr/local/lib/faketime",
    ]
    .map(|dir| PathBuf::from(dir).join("libfaketime.so.1"));
    multiarch.chain(others).find(|path| path.is_file())
}
