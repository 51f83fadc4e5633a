//! The math that `core` lacks, as OpenCL C's builtins: [`DeviceFloat`] for `f32` and `f64`
//! (`x.sqrt()`, `y.atan2(x)`, `a.fma(b, c)`), [`NativeFloat`] for `f32` (`x.native_exp()`).
//!
//! Each method is the OpenCL C builtin of its name, whose precision the OpenCL C specification
//! gives (`sqrt` correctly rounded for `f64`, within 3 ulp for `f32`, …), declared under its
//! Itanium-mangled name (`_Z4sqrtf`, `_Z4sqrtd`, `_Z5atan2ff`), which LLVM's SPIR-V back end
//! makes an `OpExtInst` of `OpenCL.std`. The names are OpenCL's, so `fabs`, `fmin` and `fmax`
//! do not meet `core`'s inherent `abs`, `min` and `max`. `copysign` does: `core`'s inherent
//! method, which computes the same, is what `x.copysign(y)` calls; `DeviceFloat::copysign(x, y)`
//! calls OpenCL's. In a crate that links `std` (a host test), `std`'s inherent methods of the
//! same names (`sqrt`, `log`, …) win over these too.

/// OpenCL C's math builtins on a floating-point type, as methods: `f32` and `f64`.
pub trait DeviceFloat: Copy {
    /// Square root.
    fn sqrt(self) -> Self;
    /// Reciprocal square root, `1 / sqrt(self)`.
    fn rsqrt(self) -> Self;
    /// Cube root.
    fn cbrt(self) -> Self;
    /// Sine (radians).
    fn sin(self) -> Self;
    /// Cosine (radians).
    fn cos(self) -> Self;
    /// Tangent (radians).
    fn tan(self) -> Self;
    /// Arc sine, in radians.
    fn asin(self) -> Self;
    /// Arc cosine, in radians.
    fn acos(self) -> Self;
    /// Arc tangent, in radians.
    fn atan(self) -> Self;
    /// Arc tangent of `self / x` (`self` is y), in radians, in the quadrant of (x, y).
    fn atan2(self, x: Self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// e to the power `self`.
    fn exp(self) -> Self;
    /// 2 to the power `self`.
    fn exp2(self) -> Self;
    /// 10 to the power `self`.
    fn exp10(self) -> Self;
    /// Natural logarithm.
    fn log(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Base-10 logarithm.
    fn log10(self) -> Self;
    /// `self` to the power `y`.
    fn pow(self, y: Self) -> Self;
    /// `self` to the power `y`, for `self >= 0` (OpenCL's `powr`: `exp2(y * log2(self))`).
    fn powr(self, y: Self) -> Self;
    /// Absolute value.
    fn fabs(self) -> Self;
    /// The largest integer not above `self`.
    fn floor(self) -> Self;
    /// The smallest integer not below `self`.
    fn ceil(self) -> Self;
    /// The nearest integer, halfway cases away from zero.
    fn round(self) -> Self;
    /// The integer part, rounded toward zero.
    fn trunc(self) -> Self;
    /// The smaller of `self` and `y`; the other if one is NaN.
    fn fmin(self, y: Self) -> Self;
    /// The larger of `self` and `y`; the other if one is NaN.
    fn fmax(self, y: Self) -> Self;
    /// `self - y * trunc(self / y)`, the remainder of C's `fmod`.
    fn fmod(self, y: Self) -> Self;
    /// `sqrt(self * self + y * y)` without undue overflow or underflow.
    fn hypot(self, y: Self) -> Self;
    /// `self * b + c` with a single rounding.
    fn fma(self, b: Self, c: Self) -> Self;
    /// `self * b + c`, as the device computes it fastest: fused or not, maybe less accurate.
    fn mad(self, b: Self, c: Self) -> Self;
    /// `self`'s magnitude with `sign`'s sign.
    fn copysign(self, sign: Self) -> Self;
}

/// OpenCL C's `native_` builtins, `f32` only: faster than [`DeviceFloat`]'s, of the device's
/// own precision (OpenCL promises none) and range.
pub trait NativeFloat: Copy {
    /// Square root, at the device's native precision.
    fn native_sqrt(self) -> Self;
    /// Reciprocal square root, at the device's native precision.
    fn native_rsqrt(self) -> Self;
    /// e to the power `self`, at the device's native precision.
    fn native_exp(self) -> Self;
    /// Natural logarithm, at the device's native precision.
    fn native_log(self) -> Self;
    /// Sine (radians), at the device's native precision.
    fn native_sin(self) -> Self;
    /// Cosine (radians), at the device's native precision.
    fn native_cos(self) -> Self;
    /// `1 / self`, at the device's native precision.
    fn native_recip(self) -> Self;
    /// `self / y`, at the device's native precision.
    fn native_divide(self, y: Self) -> Self;
}

/// Implements `$trait` for `$ty`: each `method(args) = "mangled name"` calls the builtin.
macro_rules! builtins {
    ($trait:ident for $ty:ty { $($method:ident($($arg:ident),*) = $symbol:literal;)* }) => {
        impl $trait for $ty {
            $(
                #[inline(always)]
                fn $method(self $(, $arg: $ty)*) -> $ty {
                    unsafe extern "C" {
                        #[link_name = $symbol]
                        safe fn builtin(x: $ty $(, $arg: $ty)*) -> $ty;
                    }
                    builtin(self $(, $arg)*)
                }
            )*
        }
    };
}

builtins! { DeviceFloat for f32 {
    sqrt() = "_Z4sqrtf";
    rsqrt() = "_Z5rsqrtf";
    cbrt() = "_Z4cbrtf";
    sin() = "_Z3sinf";
    cos() = "_Z3cosf";
    tan() = "_Z3tanf";
    asin() = "_Z4asinf";
    acos() = "_Z4acosf";
    atan() = "_Z4atanf";
    atan2(x) = "_Z5atan2ff";
    sinh() = "_Z4sinhf";
    cosh() = "_Z4coshf";
    tanh() = "_Z4tanhf";
    exp() = "_Z3expf";
    exp2() = "_Z4exp2f";
    exp10() = "_Z5exp10f";
    log() = "_Z3logf";
    log2() = "_Z4log2f";
    log10() = "_Z5log10f";
    pow(y) = "_Z3powff";
    powr(y) = "_Z4powrff";
    fabs() = "_Z4fabsf";
    floor() = "_Z5floorf";
    ceil() = "_Z4ceilf";
    round() = "_Z5roundf";
    trunc() = "_Z5truncf";
    fmin(y) = "_Z4fminff";
    fmax(y) = "_Z4fmaxff";
    fmod(y) = "_Z4fmodff";
    hypot(y) = "_Z5hypotff";
    fma(b, c) = "_Z3fmafff";
    mad(b, c) = "_Z3madfff";
    copysign(sign) = "_Z8copysignff";
} }

builtins! { DeviceFloat for f64 {
    sqrt() = "_Z4sqrtd";
    rsqrt() = "_Z5rsqrtd";
    cbrt() = "_Z4cbrtd";
    sin() = "_Z3sind";
    cos() = "_Z3cosd";
    tan() = "_Z3tand";
    asin() = "_Z4asind";
    acos() = "_Z4acosd";
    atan() = "_Z4atand";
    atan2(x) = "_Z5atan2dd";
    sinh() = "_Z4sinhd";
    cosh() = "_Z4coshd";
    tanh() = "_Z4tanhd";
    exp() = "_Z3expd";
    exp2() = "_Z4exp2d";
    exp10() = "_Z5exp10d";
    log() = "_Z3logd";
    log2() = "_Z4log2d";
    log10() = "_Z5log10d";
    pow(y) = "_Z3powdd";
    powr(y) = "_Z4powrdd";
    fabs() = "_Z4fabsd";
    floor() = "_Z5floord";
    ceil() = "_Z4ceild";
    round() = "_Z5roundd";
    trunc() = "_Z5truncd";
    fmin(y) = "_Z4fmindd";
    fmax(y) = "_Z4fmaxdd";
    fmod(y) = "_Z4fmoddd";
    hypot(y) = "_Z5hypotdd";
    fma(b, c) = "_Z3fmaddd";
    mad(b, c) = "_Z3madddd";
    copysign(sign) = "_Z8copysigndd";
} }

builtins! { NativeFloat for f32 {
    native_sqrt() = "_Z11native_sqrtf";
    native_rsqrt() = "_Z12native_rsqrtf";
    native_exp() = "_Z10native_expf";
    native_log() = "_Z10native_logf";
    native_sin() = "_Z10native_sinf";
    native_cos() = "_Z10native_cosf";
    native_recip() = "_Z12native_recipf";
    native_divide(y) = "_Z13native_divideff";
} }
