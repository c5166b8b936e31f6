//! Starting a CGI script: fork and exec with three pipes, in a process group
//! of its own, with a clean signal state. Everything the child needs is
//! prepared before the fork, so between fork and exec the child only makes
//! system calls (no allocation, no locks: the parent has other threads).
//! This replaces std::process::Command, whose environment map and general
//! machinery cost about 22 KiB of the binary.

use std::ffi::{CString, OsStr, c_char};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork, pipe2};

/// A running script: its pid (also its process group) and its pipes; or
/// an SCGI handler's connection, with no process of ours and no stderr.
pub struct Spawned {
    pub pid: Option<Pid>,
    pub stdin: File,
    pub stdout: File,
    pub stderr: Option<File>,
}

fn cstring(s: &[u8]) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in an argument"))
}

/// Runs `program` with `args` (after argv[0]) and exactly `env`, in `dir`.
pub fn spawn(
    program: &Path,
    args: &[&OsStr],
    env: &[(String, String)],
    dir: &Path,
) -> io::Result<Spawned> {
    let program_c = cstring(program.as_os_str().as_bytes())?;
    let dir_c = cstring(dir.as_os_str().as_bytes())?;
    let mut argv_c = vec![program_c.clone()];
    for a in args {
        argv_c.push(cstring(a.as_bytes())?);
    }
    let env_c = env
        .iter()
        .map(|(k, v)| cstring(format!("{k}={v}").as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let argv: Vec<*const c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const c_char> = env_c
        .iter()
        .map(|c| c.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();

    let cloexec = OFlag::O_CLOEXEC;
    let (in_r, in_w) = pipe2(cloexec)?;
    let (out_r, out_w) = pipe2(cloexec)?;
    let (err_r, err_w) = pipe2(cloexec)?;
    // Closed by a successful exec; carries errno if exec fails.
    let (report_r, report_w) = pipe2(cloexec)?;

    // SAFETY: the child calls only async-signal-safe system calls on data
    // prepared above, then execs or exits; the parent continues normally.
    match unsafe { fork() }? {
        ForkResult::Child => {
            // SAFETY: only raw system calls on valid descriptors and pointers.
            unsafe {
                child(
                    &program_c,
                    &dir_c,
                    &argv,
                    &envp,
                    [&in_r, &out_w, &err_w],
                    &report_w,
                )
            }
        }
        ForkResult::Parent { child } => {
            // Also here, so a kill of the group cannot race the child's own setpgid.
            let _ = nix::unistd::setpgid(child, child);
            drop((in_r, out_w, err_w, report_w));
            let mut errno = [0u8; 4];
            if read_all(&report_r, &mut errno) == 4 {
                let _ = waitpid(child, None);
                return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
            }
            Ok(Spawned {
                pid: Some(child),
                stdin: File::from(in_w),
                stdout: File::from(out_r),
                stderr: Some(File::from(err_r)),
            })
        }
    }
}

/// The child side: set up and exec. Never returns.
///
/// # Safety
/// Must run in a freshly forked child; the pointers must be valid and the
/// arrays null-terminated.
unsafe fn child(
    program: &CString,
    dir: &CString,
    argv: &[*const c_char],
    envp: &[*const c_char],
    stdio: [&OwnedFd; 3],
    report: &OwnedFd,
) -> ! {
    // SAFETY: plain system calls; every pointer outlives the exec.
    unsafe {
        libc::setpgid(0, 0);
        // The server blocks its signals and ignores SIGPIPE; a script starts clean.
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        for (fd, target) in stdio.iter().zip(0..) {
            // dup2 clears close-on-exec on the copy, so only 0, 1, 2 survive the exec.
            if libc::dup2(fd.as_raw_fd(), target) < 0 {
                fail(report);
            }
        }
        if libc::chdir(dir.as_ptr()) < 0 {
            fail(report);
        }
        libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
        fail(report)
    }
}

/// Reports errno to the parent and exits without running any destructor.
///
/// # Safety
/// Only in the forked child.
unsafe fn fail(report: &OwnedFd) -> ! {
    // SAFETY: errno location, write and _exit are async-signal-safe.
    unsafe {
        let errno = *libc::__errno_location();
        let bytes = errno.to_ne_bytes();
        libc::write(report.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    }
}

fn read_all(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match nix::unistd::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    got
}

/// Whether the script has exited (reaped now if so).
pub fn exited(pid: Pid) -> bool {
    !matches!(
        waitpid(pid, Some(WaitPidFlag::WNOHANG)),
        Ok(WaitStatus::StillAlive)
    )
}
