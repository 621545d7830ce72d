//! The `${{ }}` expression language of GitHub Actions, as far as this project's workflows use
//! it: literals, context paths (`a.b`, `a[0]`, `a.*.b`), `!`, comparisons, `&&`, `||`,
//! parentheses and the functions `fromJSON`, `toJSON`, `contains`, `always`, `success`,
//! `failure`, `cancelled`. Anything else panics with the expression, so a workflow edit that
//! needs more of the language fails the harness loudly instead of being evaluated wrongly.
//! Semantics follow GitHub's documentation: loose equality coerces to numbers, string
//! comparison ignores case, `||`/`&&` return an operand, a missing property is `null`.

use serde_json::Value;
use std::collections::BTreeMap;

/// The contexts an expression may read, and the job or step status for the status functions.
pub struct Ctx<'a> {
    pub contexts: &'a BTreeMap<String, Value>,
    /// `success()`: every needed job (job level) or every earlier step (step level) succeeded.
    pub success: bool,
    pub failure: bool,
    /// `cancelled()`: the job (its timeout passed) or a needed job was cancelled.
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    Op(&'static str),
}

fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '\'' {
            let mut s = String::new();
            i += 1;
            loop {
                assert!(i < c.len(), "unterminated string in `{src}`");
                if c[i] == '\'' {
                    if i + 1 < c.len() && c[i + 1] == '\'' {
                        s.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                s.push(c[i]);
                i += 1;
            }
            out.push(Tok::Str(s));
        } else if ch.is_ascii_digit() {
            let start = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
            let t: String = c[start..i].iter().collect();
            out.push(Tok::Num(
                t.parse()
                    .unwrap_or_else(|_| panic!("number `{t}` in `{src}`")),
            ));
        } else if ch.is_ascii_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_' || c[i] == '-') {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else {
            let two: String = c[i..(i + 2).min(c.len())].iter().collect();
            let op = ["==", "!=", "<=", ">=", "&&", "||"]
                .into_iter()
                .find(|o| *o == two);
            if let Some(o) = op {
                out.push(Tok::Op(o));
                i += 2;
                continue;
            }
            let one = ["!", "<", ">", "(", ")", "[", "]", ".", ",", "*"]
                .into_iter()
                .find(|o| o.starts_with(ch))
                .unwrap_or_else(|| panic!("character `{ch}` in expression `{src}`"));
            out.push(Tok::Op(one));
            i += 1;
        }
    }
    out
}

struct P<'a, 'c> {
    toks: Vec<Tok>,
    pos: usize,
    src: &'a str,
    ctx: &'a Ctx<'c>,
}

/// A value, and whether it came out of a `*` filter (property access then maps over it).
type V = (Value, bool);

impl P<'_, '_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn eat(&mut self, op: &str) -> bool {
        if self.peek() == Some(&Tok::Op(leak(op))) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, op: &str) {
        assert!(self.eat(op), "expected `{op}` in `{}`", self.src);
    }
    fn or(&mut self) -> Value {
        let mut l = self.and();
        while self.eat("||") {
            let r = self.and();
            if !truthy(&l) {
                l = r;
            }
        }
        l
    }
    fn and(&mut self) -> Value {
        let mut l = self.eq();
        while self.eat("&&") {
            let r = self.eq();
            if truthy(&l) {
                l = r;
            }
        }
        l
    }
    fn eq(&mut self) -> Value {
        let mut l = self.cmp();
        loop {
            if self.eat("==") {
                let r = self.cmp();
                l = Value::Bool(loose_eq(&l, &r));
            } else if self.eat("!=") {
                let r = self.cmp();
                l = Value::Bool(!loose_eq(&l, &r));
            } else {
                return l;
            }
        }
    }
    fn cmp(&mut self) -> Value {
        let mut l = self.unary();
        for op in ["<=", ">=", "<", ">"] {
            if self.eat(op) {
                let r = self.unary();
                let (a, b) = (num(&l), num(&r));
                l = Value::Bool(match op {
                    "<=" => a <= b,
                    ">=" => a >= b,
                    "<" => a < b,
                    _ => a > b,
                });
                break;
            }
        }
        l
    }
    fn unary(&mut self) -> Value {
        if self.eat("!") {
            return Value::Bool(!truthy(&self.unary()));
        }
        self.postfix().0
    }
    fn postfix(&mut self) -> V {
        let mut v = self.primary();
        loop {
            if self.eat(".") {
                if self.eat("*") {
                    v = (star(&v.0), true);
                    continue;
                }
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    panic!("property name expected in `{}`", self.src)
                };
                self.pos += 1;
                v = prop(&v, &name);
            } else if self.eat("[") {
                if self.eat("*") {
                    self.expect("]");
                    v = (star(&v.0), true);
                    continue;
                }
                let key = self.or();
                self.expect("]");
                v = match key {
                    Value::Number(n) => (
                        v.0.get(n.as_f64().unwrap() as usize)
                            .cloned()
                            .unwrap_or(Value::Null),
                        false,
                    ),
                    Value::String(s) => prop(&v, &s),
                    k => panic!("index `{k}` in `{}`", self.src),
                };
            } else {
                return v;
            }
        }
    }
    fn primary(&mut self) -> V {
        let tok = self
            .peek()
            .cloned()
            .unwrap_or_else(|| panic!("unexpected end of `{}`", self.src));
        self.pos += 1;
        match tok {
            Tok::Num(n) => (serde_json::json!(n), false),
            Tok::Str(s) => (Value::String(s), false),
            Tok::Op("(") => {
                let v = self.or();
                self.expect(")");
                (v, false)
            }
            Tok::Ident(id) if self.eat("(") => {
                let mut args = Vec::new();
                if !self.eat(")") {
                    loop {
                        args.push(self.or());
                        if self.eat(")") {
                            break;
                        }
                        self.expect(",");
                    }
                }
                (self.call(&id, args), false)
            }
            Tok::Ident(id) => match id.as_str() {
                "true" => (Value::Bool(true), false),
                "false" => (Value::Bool(false), false),
                "null" => (Value::Null, false),
                _ => (
                    self.ctx
                        .contexts
                        .get(&id)
                        .unwrap_or_else(|| {
                            panic!("context `{id}` is not provided (in `{}`)", self.src)
                        })
                        .clone(),
                    false,
                ),
            },
            t => panic!("unexpected `{t:?}` in `{}`", self.src),
        }
    }
    fn call(&self, f: &str, a: Vec<Value>) -> Value {
        match (f.to_ascii_lowercase().as_str(), a.as_slice()) {
            ("fromjson", [Value::String(s)]) => serde_json::from_str(s)
                .unwrap_or_else(|e| panic!("fromJSON({s:?}): {e} (in `{}`)", self.src)),
            ("tojson", [v]) => Value::String(serde_json::to_string_pretty(v).unwrap()),
            ("contains", [Value::Array(items), x]) => {
                Value::Bool(items.iter().any(|i| loose_eq(i, x)))
            }
            ("contains", [s, x]) => Value::Bool(
                to_string(s)
                    .to_lowercase()
                    .contains(&to_string(x).to_lowercase()),
            ),
            ("always", []) => Value::Bool(true),
            ("success", []) => Value::Bool(self.ctx.success),
            ("failure", []) => Value::Bool(self.ctx.failure),
            ("cancelled", []) => Value::Bool(self.ctx.cancelled),
            _ => panic!(
                "function {f}({}) is not implemented by the harness (in `{}`)",
                a.len(),
                self.src
            ),
        }
    }
}

fn leak(op: &str) -> &'static str {
    [
        "==", "!=", "<=", ">=", "&&", "||", "!", "<", ">", "(", ")", "[", "]", ".", ",", "*",
    ]
    .into_iter()
    .find(|o| *o == op)
    .unwrap()
}

fn star(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Array(m.values().cloned().collect()),
        Value::Array(a) => Value::Array(a.clone()),
        _ => Value::Array(vec![]),
    }
}

fn prop(v: &V, name: &str) -> V {
    let get = |x: &Value| match x {
        // Property names are case-insensitive.
        Value::Object(m) => m
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or(Value::Null),
        _ => Value::Null,
    };
    match v {
        (Value::Array(items), true) => (Value::Array(items.iter().map(get).collect()), true),
        (x, _) => (get(x), false),
    }
}

pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap(),
        Value::String(s) if s.trim().is_empty() => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.eq_ignore_ascii_case(y),
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
            std::ptr::eq(a, b)
        }
        _ => num(a) == num(b),
    }
}

/// How a value reads when spliced into a string (env values, names, `with:` strings).
pub fn to_string(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        other => serde_json::to_string(other).unwrap(),
    }
}

/// One bare expression (no `${{ }}` around it).
pub fn eval(src: &str, ctx: &Ctx) -> Value {
    let mut p = P {
        toks: lex(src),
        pos: 0,
        src,
        ctx,
    };
    let v = p.or();
    assert!(p.pos == p.toks.len(), "trailing tokens in `{src}`");
    v
}

/// A YAML string value: one `${{ }}` spanning it all keeps the value's type (a matrix, a
/// number); anything else is text with each expression spliced in.
pub fn template(s: &str, ctx: &Ctx) -> Value {
    let t = s.trim();
    if t.starts_with("${{") && t.ends_with("}}") && t.matches("${{").count() == 1 {
        return eval(&t[3..t.len() - 2], ctx);
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find("}}")
            .unwrap_or_else(|| panic!("unclosed `${{{{` in `{s}`"));
        out.push_str(&to_string(&eval(&rest[i + 3..i + end], ctx)));
        rest = &rest[i + end + 2..];
    }
    out.push_str(rest);
    Value::String(out)
}

/// An `if:` condition: `${{ }}` optional; without a status function it means
/// `success() && (cond)`.
pub fn condition(cond: Option<&str>, ctx: &Ctx) -> bool {
    let Some(c) = cond else { return ctx.success };
    let mut c = c.trim();
    if c.starts_with("${{") && c.ends_with("}}") {
        c = c[3..c.len() - 2].trim();
    }
    let status = ["always(", "success(", "failure(", "cancelled("]
        .iter()
        .any(|f| c.contains(f));
    let v = truthy(&eval(c, ctx));
    if status {
        v
    } else {
        ctx.success && v
    }
}
