//! Reading the small files of sysfs and procfs without trusting them. A
//! captured tree, or one a user can write into (`marrow doctor
//! --sysfs-root`), may hold a FIFO that blocks a reader forever, a link to
//! `/dev/zero` that never ends, or a file far larger than the attribute it
//! stands for: only regular files are read, opened so that a FIFO cannot
//! block the open, and never past the size such a file can have.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// A sysfs attribute holds at most a page.
pub const ATTRIBUTE_MAX: usize = 4096;
/// A PCI function's configuration space (PCIe extended configuration space).
pub const CONFIG_MAX: usize = 4096;
/// The procfs text files read (`cmdline`, `driver/nvidia/params`, `self/limits`).
pub const PROC_TEXT_MAX: usize = 64 << 10;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum HostFileError {
    /// It could not be opened (absent, no permission...).
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    /// It is a FIFO, a device, a socket or a directory.
    #[error("{0}, not a regular file")]
    NotRegular(&'static str),
    /// Reading failed.
    #[error("cannot read: {0}")]
    Read(std::io::Error),
    /// It holds more than such a file can.
    #[error("longer than {cap} bytes, the most such a file has")]
    TooLong {
        /// The most bytes read.
        cap: usize,
    },
}

impl HostFileError {
    /// The file is not there: for optional files, not worth a warning.
    pub fn is_absent(&self) -> bool {
        matches!(self, HostFileError::Open(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_dir() {
        "a directory"
    } else {
        "something else"
    }
}

/// Opens `path` for reading without blocking on a FIFO and without taking it
/// as a controlling terminal, then checks (on the open file) that it is a
/// regular file.
fn open_regular(path: &Path) -> Result<File, HostFileError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(HostFileError::Open)?;
    let t = f.metadata().map_err(HostFileError::Read)?.file_type();
    if !t.is_file() {
        return Err(HostFileError::NotRegular(kind_of(t)));
    }
    Ok(f)
}

/// The bytes of the regular file `path`, if it holds at most `cap`.
pub fn read(path: &Path, cap: usize) -> Result<Vec<u8>, HostFileError> {
    let f = open_regular(path)?;
    let mut bytes = Vec::new();
    f.take(cap as u64 + 1).read_to_end(&mut bytes).map_err(HostFileError::Read)?;
    if bytes.len() > cap {
        return Err(HostFileError::TooLong { cap });
    }
    Ok(bytes)
}

/// [`read`] as text (invalid UTF-8 replaced), `None` on any failure.
pub fn read_text(path: &Path, cap: usize) -> Option<String> {
    read(path, cap).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("marrow-hostfile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_regular_files_and_only_up_to_the_cap() {
        let d = dir("kinds");
        std::fs::write(d.join("attr"), "4: ACTIVE\n").unwrap();
        assert_eq!(read(&d.join("attr"), ATTRIBUTE_MAX).unwrap(), b"4: ACTIVE\n");
        std::fs::write(d.join("big"), vec![b'x'; ATTRIBUTE_MAX + 1]).unwrap();
        assert!(matches!(read(&d.join("big"), ATTRIBUTE_MAX), Err(HostFileError::TooLong { cap: 4096 })));
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        let e = read(&d.join("zero"), ATTRIBUTE_MAX).unwrap_err();
        assert_eq!(e.to_string(), "a character device, not a regular file");
        let fifo = d.join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // No writer: a blocking open would wait here forever.
        assert_eq!(read(&fifo, ATTRIBUTE_MAX).unwrap_err().to_string(), "a FIFO, not a regular file");
        assert!(read(&d, ATTRIBUTE_MAX).unwrap_err().to_string().contains("a directory"));
        assert!(read(&d.join("absent"), ATTRIBUTE_MAX).unwrap_err().is_absent());
        let _ = std::fs::remove_dir_all(&d);
    }
}
