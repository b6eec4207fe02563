//! An event's fields (`Output::Event`): a small ordered map with static keys.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::read::{object, Read};

/// An event's fields: a small map written as a JSON object in key order. The core's
/// keys are static names, so an event costs no allocation per key.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fields(Vec<(Cow<'static, str>, Value)>);

impl Fields {
    /// Sets `key` (a repeated key keeps its last value).
    pub fn insert(&mut self, key: impl Into<Cow<'static, str>>, value: Value) {
        let key = key.into();
        match self
            .0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key.as_ref()))
        {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// The fields in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Fields {
    /// Room for `n` fields, to be pushed in key order (`push_sorted`).
    pub(crate) fn with_capacity(n: usize) -> Fields {
        Fields(Vec::with_capacity(n))
    }

    /// Appends a field whose static key sorts after every key already there (a hot
    /// path's event, built in key order with no second vector).
    pub(crate) fn push_sorted(&mut self, key: &'static str, value: Value) {
        debug_assert!(
            self.0.last().is_none_or(|(k, _)| k.as_ref() < key),
            "field `{key}` is pushed in key order"
        );
        self.0.push((Cow::Borrowed(key), value));
    }

    /// Fields from static keys: taken in one go with exact capacity when the keys
    /// are already in strictly increasing order (as the core writes them), else
    /// inserted one by one (a repeated key keeps its last value).
    pub(crate) fn from_static(pairs: Vec<(&'static str, Value)>) -> Fields {
        if pairs.windows(2).all(|w| w[0].0 < w[1].0) {
            let mut v = Vec::with_capacity(pairs.len());
            v.extend(pairs.into_iter().map(|(k, v)| (Cow::Borrowed(k), v)));
            return Fields(v);
        }
        pairs.into_iter().collect()
    }
}

impl<K: Into<Cow<'static, str>>> FromIterator<(K, Value)> for Fields {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Fields {
        let mut fields = Fields(Vec::new());
        for (k, v) in iter {
            fields.insert(k, v);
        }
        fields
    }
}

/// `fields["key"]`, `null` when absent (as `serde_json::Value` indexing does).
impl std::ops::Index<&str> for Fields {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl Fields {
    /// An event's fields from a JSON object.
    pub(crate) fn from_json(value: &Value) -> Read<Fields> {
        let map = object(value, "a map")?.0;
        // The object's keys are already in order.
        Ok(Fields(
            map.iter()
                .map(|(k, v)| (Cow::Owned(k.clone()), v.clone()))
                .collect(),
        ))
    }
}
