//! Property sets: the named, typed key/value lists attached to every device image (DPC++'s
//! `_sycl_device_binary_property_set_struct`). Value types keep DPC++'s numbering.

use crate::codec::Encoder;

pub(crate) const TYPE_UINT32: u32 = 1;
pub(crate) const TYPE_BYTE_ARRAY: u32 = 2;
pub(crate) const TYPE_STRING: u32 = 3;

/// A property's typed value (DPC++'s property types 1 to 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyValue {
    /// An unsigned 32-bit integer (type 1).
    U32(u32),
    /// A byte array (type 2); the requirement lists pack little-endian `u32`s in it.
    Bytes(Vec<u8>),
    /// UTF-8 text (type 3).
    String(String),
}

/// One named value of a property set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key: for the symbol sets the symbol, for the per-kernel sets the kernel.
    pub name: String,
    /// The value.
    pub value: PropertyValue,
}

impl Property {
    /// The property `name` with `value`.
    pub fn new(name: impl Into<String>, value: PropertyValue) -> Property {
        Property { name: name.into(), value }
    }
}

/// A named list of properties attached to a device image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertySet {
    /// The set's name (`SYCL/…`; [`crate::sets`] lists those this toolkit reads and writes).
    pub name: String,
    /// The properties, in the order they were written.
    pub properties: Vec<Property>,
}

impl PropertySet {
    /// A symbol list (`SYCL/exported symbols`, `SYCL/imported symbols`): one property per
    /// symbol, named by it, with the value 1 as DPC++ records it.
    pub fn symbols<S: Into<String>>(name: &str, symbols: impl IntoIterator<Item = S>) -> Self {
        PropertySet {
            name: name.to_string(),
            properties: symbols
                .into_iter()
                .map(|s| Property::new(s, PropertyValue::U32(1)))
                .collect(),
        }
    }

    /// A reduced call graph (`SYCL/call graph`): one property per node, named by it, whose
    /// string value is its callees separated by [`crate::sets::CALL_GRAPH_SEPARATOR`].
    pub fn call_graph<N, C, S>(nodes: impl IntoIterator<Item = (N, C)>) -> Self
    where
        N: Into<String>,
        C: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let separator = crate::sets::CALL_GRAPH_SEPARATOR.to_string();
        let properties = nodes.into_iter().map(|(node, callees)| {
            let callees: Vec<S> = callees.into_iter().collect();
            let list: Vec<&str> = callees.iter().map(AsRef::as_ref).collect();
            Property::new(node, PropertyValue::String(list.join(&separator)))
        });
        PropertySet { name: crate::sets::CALL_GRAPH.to_string(), properties: properties.collect() }
    }

    /// Kernel parameter lists (`SYCL/kernel arguments`): one property per kernel, named by it,
    /// whose string value is [`crate::encode_kernel_params`] of its parameters.
    pub fn kernel_arguments<N, P>(kernels: impl IntoIterator<Item = (N, P)>) -> Self
    where
        N: Into<String>,
        P: AsRef<[crate::KernelParam]>,
    {
        let properties = kernels.into_iter().map(|(kernel, params)| {
            Property::new(
                kernel,
                PropertyValue::String(crate::encode_kernel_params(params.as_ref())),
            )
        });
        PropertySet {
            name: crate::sets::KERNEL_ARGUMENTS.to_string(),
            properties: properties.collect(),
        }
    }

    /// The value of the first property called `name`, if the set has one.
    pub fn get(&self, name: &str) -> Option<&PropertyValue> {
        self.properties.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    pub(crate) fn encode(&self, e: &mut Encoder) {
        e.str(&self.name);
        e.u32(super::len_u32(self.properties.len()));
        for p in &self.properties {
            e.str(&p.name);
            match &p.value {
                PropertyValue::U32(v) => {
                    e.u32(TYPE_UINT32);
                    e.u32(*v);
                }
                PropertyValue::Bytes(v) => {
                    e.u32(TYPE_BYTE_ARRAY);
                    e.bytes(v);
                }
                PropertyValue::String(v) => {
                    e.u32(TYPE_STRING);
                    e.str(v);
                }
            }
        }
    }
}
