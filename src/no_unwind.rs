//! No stack unwinder in the static musl builds. With `panic = "abort"`
//! nothing unwinds; the standard library still links libunwind (about
//! 45 KiB on aarch64) to walk the stack for a backtrace, printed only when
//! `RUST_BACKTRACE` is set. These definitions of the unwinder calls it
//! makes take libunwind's place: a backtrace is then empty, and a panic
//! still prints its message and location before it aborts.

use std::ffi::c_void;

/// `_URC_END_OF_STACK`: the walk is over at once.
const END_OF_STACK: i32 = 5;

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Backtrace(_trace: *const c_void, _arg: *mut c_void) -> i32 {
    END_OF_STACK
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetIP(_ctx: *mut c_void) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetIPInfo(_ctx: *mut c_void, before: *mut i32) -> usize {
    if !before.is_null() {
        // SAFETY: a non-null `before` points to the caller's int.
        unsafe { before.write(0) };
    }
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetLanguageSpecificData(_ctx: *mut c_void) -> *const c_void {
    std::ptr::null()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetRegionStart(_ctx: *mut c_void) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetDataRelBase(_ctx: *mut c_void) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetTextRelBase(_ctx: *mut c_void) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_SetGR(_ctx: *mut c_void, _reg: i32, _value: usize) {}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_SetIP(_ctx: *mut c_void, _value: usize) {}

/// Reached only while unwinding, which `panic = "abort"` never starts.
// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume(_exception: *mut c_void) -> ! {
    std::process::abort()
}

// The rest of the two libunwind objects the calls above live in: with one
// of them still undefined, a linker that takes archive members whole (GNU
// ld) would pull the object in beside these definitions.

/// Unwinding never starts: `panic = "abort"` raises no exception.
// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_RaiseException(_exception: *mut c_void) -> i32 {
    std::process::abort()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Resume_or_Rethrow(_exception: *mut c_void) -> i32 {
    std::process::abort()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_ForcedUnwind(
    _exception: *mut c_void,
    _stop: *const c_void,
    _arg: *mut c_void,
) -> i32 {
    std::process::abort()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_DeleteException(_exception: *mut c_void) {}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetGR(_ctx: *mut c_void, _reg: i32) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_GetCFA(_ctx: *mut c_void) -> usize {
    0
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_FindEnclosingFunction(_pc: *mut c_void) -> *mut c_void {
    std::ptr::null_mut()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn _Unwind_Find_FDE(_pc: *mut c_void, _bases: *mut c_void) -> *const c_void {
    std::ptr::null()
}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn __register_frame(_fde: *const c_void) {}

// SAFETY: takes the place of libunwind's function of this name, with its C signature.
#[unsafe(no_mangle)]
extern "C" fn __deregister_frame(_fde: *const c_void) {}
