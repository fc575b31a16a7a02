//! Writing a generated file: only when its bytes change, and never through a symlink.
//!
//! The CLI's `-o` and the build-script API share this writer. Whatever sits at the output
//! path is replaced, not written into: a symlink planted there (pointing at `~/.bashrc`, say)
//! is swapped for a regular file and what it pointed to stays untouched. The new bytes go to
//! a temporary file in the same folder, which is then renamed over the target, so a reader
//! never sees a half-written file either.

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What [`write_if_changed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The target was a regular file holding exactly these bytes; it was left alone, so its
    /// modification time did not move and nothing downstream rebuilds.
    Unchanged,
    /// The bytes were written to a new file that replaced whatever was at the path.
    Written,
}

/// Writes `bytes` to `path` unless a regular file there already holds exactly them.
///
/// The file is written beside the target and renamed over it. A symlink at `path` is
/// replaced by the file, never followed, and is never read either (it could point at a
/// device that never ends). A regular file that is replaced keeps its permissions.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> io::Result<Written> {
    let existing = match fs::symlink_metadata(path) {
        Ok(metadata) => Some(metadata),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    let regular = existing.filter(|m| m.file_type().is_file());
    if let Some(metadata) = &regular
        && metadata.len() == bytes.len() as u64
        && fs::read(path)? == bytes
    {
        return Ok(Written::Unchanged);
    }
    let (temp, mut file) = create_beside(path)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| match &regular {
            Some(metadata) => file.set_permissions(metadata.permissions()),
            None => Ok(()),
        })
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&temp, path));
    if let Err(error) = written {
        // Best effort: the error that matters is the one returned.
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    Ok(Written::Written)
}

/// Creates a new, empty temporary file in the folder of `path`; `create_new` refuses to
/// open anything already there, a symlink included.
fn create_beside(path: &Path) -> io::Result<(PathBuf, fs::File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let folder = match path.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut attempts = 0;
    loop {
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(
            ".{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let temp = folder.join(temp_name);
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            // A leftover of a crashed run of a process with the same id: try the next name.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempts < 100 => {
                attempts += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Written, write_if_changed};

    #[test]
    fn unchanged_bytes_are_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.rs");
        assert_eq!(write_if_changed(&path, b"one").unwrap(), Written::Written);
        let written = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(write_if_changed(&path, b"one").unwrap(), Written::Unchanged);
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            written
        );
        assert_eq!(write_if_changed(&path, b"two").unwrap(), Written::Written);
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        // Nothing left behind but the file itself.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_replaced_file_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.rs");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_if_changed(&path, b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
    }
}
