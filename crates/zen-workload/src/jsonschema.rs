//! A small validator for the subset of JSON Schema that
//! `docs/summary.schema.json` uses: `type` (a name or a list of names),
//! `required`, `properties`, `additionalProperties` (a schema or `false`),
//! `items`, `minimum`, `const` and local `$ref`s (`#/$defs/name`). Unknown keywords (`$schema`, `title`,
//! `description`, …) are ignored, as the standard says.
//!
//! Why not a crate: the full validators pull in regex engines and HTTP
//! clients for remote `$ref`s; the schema of one file format needs none of it.

use serde_json::Value;

fn type_matches(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        _ => false,
    }
}

/// Every way `value` breaks `schema`, as "path: problem" lines (empty = valid).
pub fn validate(value: &Value, schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    Validator { root: schema }.check(value, schema, "$", &mut problems);
    problems
}

struct Validator<'s> {
    root: &'s Value,
}

impl<'s> Validator<'s> {
    fn check(&self, value: &Value, schema: &'s Value, path: &str, problems: &mut Vec<String>) {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            match reference.strip_prefix('#').and_then(|pointer| self.root.pointer(pointer)) {
                Some(target) => self.check(value, target, path, problems),
                None => problems.push(format!("{path}: unresolvable $ref `{reference}`")),
            }
            return;
        }
        if let Some(ty) = schema.get("type") {
            let names: Vec<&str> = match ty {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                _ => vec![],
            };
            if !names.iter().any(|n| type_matches(value, n)) {
                problems.push(format!("{path}: expected {}, found {value}", names.join(" or ")));
                return;
            }
        }
        if let Some(expected) = schema.get("const")
            && value != expected
        {
            problems.push(format!("{path}: expected {expected}, found {value}"));
        }
        if let (Some(min), Some(v)) =
            (schema.get("minimum").and_then(Value::as_f64), value.as_f64())
            && v < min
        {
            problems.push(format!("{path}: {v} is below the minimum {min}"));
        }
        if let Value::Object(map) = value {
            self.check_object(map, schema, path, problems);
        }
        if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
            for (i, item) in items.iter().enumerate() {
                self.check(item, item_schema, &format!("{path}[{i}]"), problems);
            }
        }
    }

    fn check_object(
        &self,
        map: &serde_json::Map<String, Value>,
        schema: &'s Value,
        path: &str,
        problems: &mut Vec<String>,
    ) {
        for key in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(key) = key.as_str()
                && !map.contains_key(key)
            {
                problems.push(format!("{path}: missing required key `{key}`"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, v) in map {
            let child = format!("{path}.{key}");
            match (properties.and_then(|p| p.get(key)), schema.get("additionalProperties")) {
                (Some(s), _) => self.check(v, s, &child, problems),
                (None, Some(Value::Bool(false))) => {
                    problems.push(format!("{child}: unexpected key"))
                }
                (None, Some(s)) if s.is_object() => self.check(v, s, &child, problems),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_missing_keys_wrong_types_and_extra_keys() {
        let schema = json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "integer", "minimum": 0},
                "b": {"type": "array", "items": {"type": ["string", "null"]}},
                "c": {"const": 1}
            },
            "additionalProperties": false
        });
        assert!(validate(&json!({"a": 1, "b": ["x", null], "c": 1}), &schema).is_empty());
        let problems = validate(&json!({"a": -1, "b": [3], "c": 2, "d": 0}), &schema);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("$.a") && p.contains("minimum")));
        assert!(problems.iter().any(|p| p.contains("$.b[0]")));
        assert!(problems.iter().any(|p| p.contains("$.d: unexpected")));
        let missing = validate(&json!({"a": 1}), &schema);
        assert_eq!(missing, vec!["$: missing required key `b`".to_string()]);
    }

    #[test]
    fn local_references_are_followed() {
        let schema = json!({
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"$ref": "#/$defs/missing"}},
            "$defs": {"n": {"type": "number"}}
        });
        assert!(validate(&json!({"x": 1.5}), &schema).is_empty());
        assert_eq!(validate(&json!({"x": "a"}), &schema).len(), 1);
        assert!(validate(&json!({"y": 1}), &schema)[0].contains("unresolvable"));
    }

    #[test]
    fn a_schema_for_map_values_applies_to_every_entry() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert!(validate(&json!({"x": 1, "y": 2}), &schema).is_empty());
        assert_eq!(validate(&json!({"x": "1"}), &schema).len(), 1);
    }
}
