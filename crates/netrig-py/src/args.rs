//! Arguments from Python: every value a caller passes is converted here, and a value of the wrong
//! type becomes a `ConfigError` naming the argument (never a bare `TypeError`).
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use crate::errors::{config, Result};

/// A Python value that converts to `Self`, or a `ConfigError` naming `field`.
pub trait Arg: Sized {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self>;
}

pub fn got(v: &Bound<'_, PyAny>) -> String {
    v.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into())
}

macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
                if !v.is_instance_of::<PyInt>() || v.is_instance_of::<PyBool>() {
                    return Err(config(field, format!("must be an integer (got {})", got(v))));
                }
                v.extract::<$t>()
                    .map_err(|_| config(field, format!("must be {}..{} (got {})", <$t>::MIN, <$t>::MAX, got(v))))
            }
        }
    )*};
}
int_arg!(u8, u16, u32, u64, u128, usize);

impl Arg for f64 {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        if (v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>()) && !v.is_instance_of::<PyBool>() {
            if let Ok(x) = v.extract::<f64>() {
                return Ok(x);
            }
        }
        Err(config(field, format!("must be a number (got {})", got(v))))
    }
}

impl Arg for bool {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        match v.downcast::<PyBool>() {
            Ok(b) => Ok(b.is_true()),
            Err(_) => Err(config(field, format!("must be True or False (got {})", got(v)))),
        }
    }
}

impl Arg for String {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        match v.downcast::<PyString>() {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(config(field, format!("must be a string (got {})", got(v)))),
        }
    }
}

/// `None` is `None`.
impl<T: Arg> Arg for Option<T> {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        if v.is_none() {
            Ok(None)
        } else {
            T::from_arg(v, field).map(Some)
        }
    }
}

/// A list or tuple (not a string); items are named `field[i]`.
impl<T: Arg> Arg for Vec<T> {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        if v.is_instance_of::<PyString>() {
            return Err(config(field, format!("must be a list or tuple (got {})", got(v))));
        }
        let items = v.try_iter().map_err(|_| config(field, format!("must be a list or tuple (got {})", got(v))))?;
        let mut out = Vec::new();
        for (i, item) in items.enumerate() {
            let item = item.map_err(|e| config(field, e.to_string()))?;
            out.push(T::from_arg(&item, &format!("{field}[{i}]"))?);
        }
        Ok(out)
    }
}

/// A pair such as `(frame size, weight)`.
impl<A: Arg, B: Arg> Arg for (A, B) {
    fn from_arg(v: &Bound<'_, PyAny>, field: &str) -> Result<Self> {
        let items: Vec<Bound<'_, PyAny>> = match v.try_iter() {
            Ok(it) if !v.is_instance_of::<PyString>() => it.collect::<PyResult<_>>().unwrap_or_default(),
            _ => Vec::new(),
        };
        match items.as_slice() {
            [a, b] => Ok((A::from_arg(a, field)?, B::from_arg(b, field)?)),
            _ => Err(config(field, format!("must be a pair (got {})", got(v)))),
        }
    }
}

/// An instance of the pyclass `T` (cloned out of its Python object).
pub fn instance<T: pyo3::PyClass + Clone>(v: &Bound<'_, PyAny>, field: &str) -> Result<T> {
    match v.downcast::<T>() {
        Ok(b) => Ok(b.borrow().clone()),
        Err(_) => {
            Err(config(field, format!("must be a netrig._native.{} (got {})", <T as pyo3::PyTypeInfo>::NAME, got(v))))
        }
    }
}

/// `v` as `T`, or `default` when the argument was not given.
pub fn opt<T: Arg>(v: Option<&Bound<'_, PyAny>>, field: &str, default: T) -> Result<T> {
    match v {
        None => Ok(default),
        Some(v) => T::from_arg(v, field),
    }
}

/// `v` as `T` (a required argument).
pub fn req<T: Arg>(v: &Bound<'_, PyAny>, field: &str) -> Result<T> {
    T::from_arg(v, field)
}
