//! The binary step behind the package's `Policy#handle` (the hot path of every JS
//! host): the common inputs come in, and every output goes out, as compact records in
//! one byte buffer that the policy owns and the JS side reads and writes in place in
//! the module's memory. No JSON text, no string passed through wasm-bindgen, no
//! allocation for the buffer once it has grown to its working size.
//!
//! It is an encoding of the same values, not another protocol: the JS side
//! (`npm/src/binary.js`) encodes only inputs it has fully checked against what the
//! JSON reader accepts (every other input, and every input it does not recognise,
//! goes through `handleJson`, so errors keep their exact text), and it builds from
//! the records plain objects deep-equal to `JSON.parse` of `handleJson`'s answer
//! (`npm/test/handle-binary.test.mjs` holds the two equal over every vector). An
//! input the policy refuses (past a bound of `rota_core::limits`, or any other error)
//! is answered with status `REFUSED`, and JS feeds it again through the JSON step,
//! which refuses it in its own words: the policy changes nothing on an error, and the
//! bounds are checked once (in `Policy::handle`), not here as well.
//!
//! Every number of the format (tags, flags, offsets, string codes, slots) is in the
//! table below, [`wire_format!`]'s, and nowhere else: the JS side reads it from the
//! module at load (`__wireFormat`, [`format_json`]) into its local constants. Field
//! orders are this file's code and `binary.js`'s; the deep-equality test fails when
//! they disagree.
//!
//! # The buffer
//!
//! `__ioBuffer(n)` grows the buffer to at least `n` bytes and returns its address. JS
//! writes an input at offset 0 and calls `__step(len, level)`, which reads the input,
//! steps the policy, writes the answer over the buffer from offset 0 and returns the
//! buffer's (possibly new) address. `level` (a level's index in `Level::ALL`, the
//! table's `level`) leaves the events below it out of the answer, and its bit
//! [`step::NO_PERSIST`] the `persist` outputs. All numbers are little-endian.
//!
//! Input ([`input`]): a kind byte ([`input_kind`]), a flags byte (which optional
//! fields are present), a small value (report: the failure kind's index in
//! `FailureKind::ALL`, the table's `failureKind`; probeResult: 1 up, 0 down), `now` as
//! f64, up to three more f64 numbers at fixed places, then the strings, each a u32
//! byte length and its UTF-8 bytes.
//!
//! | kind | flags | numbers | strings, in order |
//! |---|---|---|---|
//! | lease, tryLease | [`request_flag`] | [`request_at`]: rank, eventTime, deadline | id, role, prefer?, pin?, label?, avoid? (u32 count + strings) |
//! | release | | [`release_at`]: lease | |
//! | cancel | | | id |
//! | report | [`report_flag`] (kind: the small value) | [`report_at`]: resetAt, retryAfterMs, status | executor, message, tag?, code? |
//! | resume | | | executor |
//! | probeResult | | | executor |
//!
//! Answer ([`header`]): its length, the buffer's size (the most the next input may
//! use), a status ([`status`]: `REFUSED` is an input this reader or the policy
//! refused: use the JSON step), 1 when there is a wake-up time, the number of outputs,
//! the wake-up time as f64, then the outputs (status `OUTPUTS`).
//!
//! A string ([`string`]) is a byte `t`: below `LONG`, an ASCII string of `t` bytes
//! follows; `LONG`, a u32 byte length and UTF-8 bytes follow; `SLOT`, a slot byte
//! ([`slot`]): the string in that slot ([`Strings`]); `SET_SLOT`, a slot byte and a
//! string (of the first two forms), which takes that slot; `INPUT_ID`, the input's own
//! `id` (a lease's or a tryLease's: the id JS just sent, which it keeps rather than
//! reads back); `PLACE`, a table byte ([`table`]) and a u32 index: the string at that
//! place of that table ([`Strings`]); `SET_PLACE`, the same and a string (of the first
//! two forms), which takes that place. A number the core holds as u64 or i64 is
//! written as the nearest f64 (what `JSON.parse` gives for its decimal text).
//!
//! Outputs ([`output_kind`]), each a kind byte and its fields in the JSON's order:
//!
//! | kind | fields |
//! |---|---|
//! | json: any output | its JSON text (string) |
//! | granted | request, lease (f64), executor, role, passed (u32), extras (u8, [`grant_extra`]), hold? (JSON text) |
//! | waiting | request, role, report, ahead (u32) |
//! | event | level (u8), name, message, count (u32), (key, value)* |
//! | grantedEvent: the `granted` event of the grant just before it | level (u8), message: its fields are that grant's `executor`, `lease`, `passed`, `request`, `role` |
//! | releasedEvent: a plain release's `released` event | level (u8), executor, lease (f64), message: its fields are `{ executor, lease }` |
//! | persist | u32 count, ids, version (u32), u32 count, exclusions: id, reason, kind, has until (u8), until? (f64) |
//!
//! The outputs of a lease, a release and a report have records; the rarer ones
//! (`cancelled`, `exhausted`, `probe`, ...) are `json`, and so is an output that names
//! an `owner` (a shared roster's) or a `clone` number and the event after such a grant.
//! Inputs with an `owner`, a `timeoutMs` or a `purpose` take the JSON step.
//!
//! A field value ([`value`]): null, false, true, a number (f64), a string, or anything
//! else (its JSON text, a string).

use rota_core::json::to_text;
use rota_core::{Failure, FailureKind, Grant, Input, LeaseRequest, Level, Output, OutputRef};
use serde_json::{Map, Value};

/// Declares the format's numbers, each once: a module of constants per group, and
/// `FORMAT`, the same table as data, which [`format_json`] writes for the JS side
/// (which takes every number it uses from there).
macro_rules! wire_format {
    ($(
        $(#[$group_doc:meta])*
        $group:ident $group_key:literal: $t:ty {
            $($(#[$doc:meta])* $name:ident $key:literal = $value:expr,)*
        }
    )*) => {
        $(
            $(#[$group_doc])*
            pub(crate) mod $group {
                $($(#[$doc])* pub(crate) const $name: $t = $value;)*
            }
        )*

        /// Every group's name and its entries.
        const FORMAT: &[(&str, &[(&str, u64)])] =
            &[$(($group_key, &[$(($key, $group::$name as u64),)*]),)*];
    };
}

wire_format! {
    /// The answer's header: where each of its fields is.
    header "header": usize {
        LENGTH "length" = 0,
        SIZE "size" = 4,
        STATUS "status" = 8,
        HAS_WAKE "hasWake" = 9,
        COUNT "count" = 12,
        WAKE_AT "wakeAt" = 16,
        /// Where the outputs start (the header's size).
        OUTPUTS "outputs" = 24,
    }
    /// An input's fixed places.
    input "input": usize {
        KIND "kind" = 0,
        FLAGS "flags" = 1,
        SMALL "small" = 2,
        NOW "now" = 8,
        /// Where the strings start.
        STRINGS "strings" = 40,
    }
    /// The answer's status.
    status "status": u8 {
        OUTPUTS "outputs" = 0,
        REFUSED "refused" = 2,
    }
    /// `__step`'s level byte, beyond the level.
    step "step": u8 {
        /// Leave the `persist` outputs out of the answer.
        NO_PERSIST "noPersist" = 4,
    }
    /// An input's kind, by its JSON `type`.
    input_kind "inputKind": u8 {
        LEASE "lease" = 1,
        TRY_LEASE "tryLease" = 2,
        RELEASE "release" = 3,
        TICK "tick" = 4,
        CANCEL "cancel" = 5,
        REPORT "report" = 6,
        RESUME "resume" = 7,
        PROBE_RESULT "probeResult" = 8,
    }
    /// A lease's or tryLease's optional fields in the flags byte.
    request_flag "requestFlag": u8 {
        RANK "rank" = 1,
        EVENT_TIME "eventTime" = 2,
        DEADLINE "deadline" = 4,
        PREFER "prefer" = 8,
        PIN "pin" = 16,
        LABEL "label" = 32,
        AVOID "avoid" = 64,
    }
    /// A lease's or tryLease's numbers.
    request_at "requestAt": usize {
        RANK "rank" = 16,
        EVENT_TIME "eventTime" = 24,
        DEADLINE "deadline" = 32,
    }
    /// A release's number.
    release_at "releaseAt": usize {
        LEASE "lease" = 16,
    }
    /// A report's optional facts in the flags byte (a `kind` is the small value).
    report_flag "reportFlag": u8 {
        KIND "kind" = 1,
        RESET_AT "resetAt" = 2,
        RETRY_AFTER_MS "retryAfterMs" = 4,
        STATUS "status" = 8,
        TAG "tag" = 16,
        CODE "code" = 32,
    }
    /// A report's numbers.
    report_at "reportAt": usize {
        RESET_AT "resetAt" = 16,
        RETRY_AFTER_MS "retryAfterMs" = 24,
        STATUS "status" = 32,
    }
    /// An output's kind (most by their JSON `type`).
    output_kind "outputKind": u8 {
        JSON "json" = 0,
        GRANTED "granted" = 1,
        WAITING "waiting" = 2,
        EVENT "event" = 3,
        GRANTED_EVENT "grantedEvent" = 4,
        RELEASED_EVENT "releasedEvent" = 5,
        PERSIST "persist" = 6,
    }
    /// A grant's extras byte.
    grant_extra "grantExtra": u8 {
        OCCUPIED "occupied" = 1,
        HOLD "hold" = 2,
    }
    /// A string's first byte.
    string "string": u8 {
        /// Below it, an ASCII string of that many bytes.
        LONG "long" = 0x80,
        SLOT "slot" = 0x81,
        SET_SLOT "setSlot" = 0x82,
        INPUT_ID "inputId" = 0x83,
        PLACE "place" = 0x84,
        SET_PLACE "setPlace" = 0x85,
    }
    /// The places with a slot ([`Strings`]). A grant's request, executor and role
    /// share theirs with the same fields of the event that follows it (sent once,
    /// referenced there).
    slot "slot": usize {
        EXECUTOR "executor" = 0,
        ROLE "role" = 1,
        REQUEST "request" = 2,
        EVENT_NAME "eventName" = 3,
        EVENT_MESSAGE "eventMessage" = 4,
        /// A waiting request's report: the same text for every request that waits on
        /// an unchanged roster (one JS string for them all).
        REPORT "report" = 5,
        /// A persisted exclusion's reason and kind: a persist lists every exclusion,
        /// and most of them share these.
        EXCLUSION_REASON "exclusionReason" = 6,
        EXCLUSION_KIND "exclusionKind" = 7,
        /// An event's field keys, by position (the first `FIELDS`).
        FIELD_KEY "fieldKey" = 8,
        /// An event's string field values, by position.
        FIELD_VALUE "fieldValue" = FIELD_KEY + FIELDS,
        FIELDS "fields" = 16,
        /// How many slots there are.
        COUNT "count" = FIELD_VALUE + FIELDS,
    }
    /// The tables of strings by an executor's place in the roster ([`Strings`]).
    table "table": u8 {
        /// Its name.
        EXECUTOR "executor" = 0,
        /// The message of the last `granted` event on it.
        GRANTED "granted" = 1,
        /// The message of the last `released` event on it.
        RELEASED "released" = 2,
        /// How many tables there are.
        COUNT "count" = 3,
    }
    /// A field value's first byte.
    value "value": u8 {
        NULL "null" = 0,
        FALSE "false" = 1,
        TRUE "true" = 2,
        NUMBER "number" = 3,
        STRING "string" = 4,
        JSON "json" = 5,
    }
}

/// The table as JSON text (`{ group: { name: value } }`, and `inputFields`: the core's
/// fields of each input), what `__wireFormat` gives the JS side.
pub(crate) fn format_json() -> String {
    let mut table = Map::new();
    for (name, entries) in FORMAT {
        let group = entries.iter().map(|&(key, n)| (key, Value::from(n)));
        table.insert((*name).to_owned(), object(group));
    }
    // Each input's fields, `type` aside: those JS lets an input carry.
    let fields = rota_core::json::input_fields();
    let fields = fields.map(|(tag, fields)| (tag, Value::from(fields.to_vec())));
    table.insert("inputFields".to_owned(), object(fields));
    // A failure's kind and an event's level: its index among the core's variants.
    for (name, names) in [("failureKind", FailureKind::NAMES), ("level", Level::NAMES)] {
        let group = names
            .iter()
            .enumerate()
            .map(|(i, &key)| (key, Value::from(i)));
        table.insert(name.to_owned(), object(group));
    }
    to_text(&Value::Object(table))
}

fn object<'a>(entries: impl Iterator<Item = (&'a str, Value)>) -> Value {
    let mut object = Map::new();
    for (key, value) in entries {
        object.insert(key.to_owned(), value);
    }
    Value::Object(object)
}

/// The largest integer every JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// The input in the buffer's first `len` bytes, or `None` when it is not one this
/// reader knows (JS then sends it as JSON: the buffer is never trusted to be well
/// formed, only to be bounded). Its bounds are `Policy::handle`'s to check.
pub(crate) fn read_input(buf: &[u8]) -> Option<Input> {
    let mut r = Reader {
        buf,
        at: input::STRINGS.min(buf.len()),
    };
    let kind = *buf.get(input::KIND)?;
    let flags = *buf.get(input::FLAGS)?;
    let small = *buf.get(input::SMALL)?;
    let now = r.u64_at(input::NOW)?;
    let has = |flag: u8| flags & flag != 0;
    Some(match kind {
        input_kind::LEASE | input_kind::TRY_LEASE => {
            use request_flag as f;
            let id = r.string()?;
            let role = r.string()?;
            let rank = r.opt(has(f::RANK), |r| r.i64_at(request_at::RANK))?;
            let event_time = r.opt(has(f::EVENT_TIME), |r| r.u64_at(request_at::EVENT_TIME))?;
            let deadline = r.opt(has(f::DEADLINE), |r| r.u64_at(request_at::DEADLINE))?;
            let prefer = r.opt(has(f::PREFER), Reader::string)?;
            let pin = r.opt(has(f::PIN), Reader::string)?;
            let label = r.opt(has(f::LABEL), Reader::string)?;
            let avoid = if has(f::AVOID) {
                let count = r.u32()? as usize;
                // Each string takes at least its 4-byte length: a bound on a bogus count.
                if count > buf.len() / 4 {
                    return None;
                }
                let mut avoid = Vec::with_capacity(count);
                for _ in 0..count {
                    avoid.push(r.string()?);
                }
                avoid
            } else {
                Vec::new()
            };
            let request = LeaseRequest {
                now,
                id,
                role,
                avoid,
                prefer,
                pin,
                rank,
                event_time,
                label,
                // A purpose takes the JSON step (`binary.js`).
                purpose: None,
                deadline,
                // An owner or a `timeoutMs` takes the JSON step (`binary.js`).
                timeout_ms: None,
                owner: None,
                borrow: None,
                // A tenant takes the JSON step (`binary.js`).
                tenant: None,
                // An affinity key takes the JSON step (`binary.js`).
                affinity: None,
            };
            if kind == input_kind::LEASE {
                Input::Lease(request)
            } else {
                Input::TryLease(request)
            }
        }
        input_kind::RELEASE => Input::Release {
            now,
            lease: r.u64_at(release_at::LEASE)?,
        },
        input_kind::TICK => Input::Tick { now },
        input_kind::CANCEL => Input::Cancel {
            now,
            id: r.string()?,
        },
        input_kind::REPORT => {
            use report_flag as f;
            let executor = r.string()?;
            let message = r.string()?;
            let tag = r.opt(has(f::TAG), Reader::string)?;
            let code = r.opt(has(f::CODE), Reader::string)?;
            let kind = r.opt(has(f::KIND), |_| {
                FailureKind::ALL.get(usize::from(small)).copied()
            })?;
            let status = r.opt(has(f::STATUS), |r| {
                // An HTTP status, as the JSON reader takes it (else its error words it).
                let status = r.u64_at(report_at::STATUS)?;
                (100..=599).contains(&status).then_some(status as u16)
            })?;
            Input::Report {
                now,
                executor,
                failure: Failure {
                    kind,
                    tag,
                    status,
                    code,
                    message,
                    reset_at: r.opt(has(f::RESET_AT), |r| r.u64_at(report_at::RESET_AT))?,
                    retry_after_ms: r.opt(has(f::RETRY_AFTER_MS), |r| {
                        r.u64_at(report_at::RETRY_AFTER_MS)
                    })?,
                },
            }
        }
        input_kind::RESUME => Input::Resume {
            now,
            executor: r.string()?,
        },
        input_kind::PROBE_RESULT => Input::ProbeResult {
            now,
            executor: r.string()?,
            up: match small {
                0 => false,
                1 => true,
                _ => return None,
            },
        },
        _ => return None,
    })
}

/// `__step`'s level byte: the lowest level of the events to answer, and whether to
/// answer the `persist` outputs.
pub(crate) fn step_level(byte: u8) -> (Level, bool) {
    let index = usize::from(byte & !step::NO_PERSIST);
    let level = Level::ALL.get(index).copied().unwrap_or(Level::Warn);
    (level, byte & step::NO_PERSIST != 0)
}

/// Reads an input: numbers at fixed places, strings in order from `at`.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// An optional field: `Some(None)` when absent, `None` when present and unreadable.
    fn opt<T>(
        &mut self,
        present: bool,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if present {
            read(self).map(Some)
        } else {
            Some(None)
        }
    }

    fn f64_at(&self, at: usize) -> Option<f64> {
        let bytes = self.buf.get(at..at + 8)?;
        Some(f64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// A whole number in `0..=MAX_SAFE` (what JS sends only after checking it).
    fn u64_at(&self, at: usize) -> Option<u64> {
        let v = self.f64_at(at)?;
        (v.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&v)).then_some(v as u64)
    }

    /// A whole number in `-MAX_SAFE..=MAX_SAFE`.
    fn i64_at(&self, at: usize) -> Option<i64> {
        let v = self.f64_at(at)?;
        (v.fract() == 0.0 && (-MAX_SAFE..=MAX_SAFE).contains(&v)).then_some(v as i64)
    }

    fn u32(&mut self) -> Option<u32> {
        let bytes = self.buf.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        let bytes = self.buf.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }
}

/// The strings an answer sends by reference: those that tend to repeat from one
/// answer to the next at the same place (an event's name, message and field keys, a
/// grant's executor and role ...). Each such place has a slot holding the last string
/// sent there; the JS side mirrors the slots (it fills one from every `SET_SLOT`
/// record and reads it for every `SLOT`). A slot is compared, never hashed: a miss
/// costs a copy into the slot's own buffer. JS reads every answer whole, in order;
/// when it could not, it calls `__ioReset`, which empties the slots on both sides.
#[derive(Default)]
pub(crate) struct Strings {
    slots: Vec<String>,
    /// The id of the lease or tryLease being answered (else empty): its grant or its
    /// wait names it as `INPUT_ID`, the string JS sent (a request id is new on every
    /// lease, so neither a slot nor a decode on the JS side pays).
    input_id: String,
    /// The tables ([`table`]): by an executor's place in the roster, the last string
    /// sent for it (its name, its last grant's and release's message). The roster
    /// hands out its executors in turn, so one slot for them all would miss on every
    /// grant. A place is a key, never trusted: its string is compared, and another
    /// string there replaces it.
    tables: [Vec<String>; table::COUNT as usize],
    /// Where an event's message is written before it is compared with its table's.
    message: String,
}

/// Longer strings are always sent whole.
const SLOT_LONGEST: usize = 160;
/// A table's places: the roster's most executors.
const TABLE_PLACES: usize = rota_core::limits::MAX_EXECUTORS;
/// A report names at most ten executors and a count: longer than other slots' strings.
const REPORT_LONGEST: usize = 1024;

/// `a == b`, eight bytes at a time: wasm32's `memcmp` is a loop over bytes, and a
/// waiting report (about a hundred bytes) is compared with its slot's on every wait.
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (words_a, words_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = words_a.remainder().iter().eq(words_b.remainder());
    tails_equal
        && words_a
            .zip(words_b)
            .all(|(x, y)| <[u8; 8]>::try_from(x).ok() == <[u8; 8]>::try_from(y).ok())
}

impl Strings {
    pub(crate) fn clear(&mut self) {
        self.slots.iter_mut().for_each(String::clear);
        self.tables.iter_mut().for_each(Vec::clear);
    }

    /// The input about to be answered: a lease's or tryLease's id is echoed (`INPUT_ID`).
    pub(crate) fn answering(&mut self, input: Option<&Input>) {
        self.input_id.clear();
        if let Some(Input::Lease(request) | Input::TryLease(request)) = input {
            self.input_id.push_str(&request.id);
        }
    }
}

/// Writes an answer over `out` from offset 0: the header, then the records. The
/// buffer keeps its length (its whole allocation, zeroed when it grew), so that JS may
/// write the next input anywhere in it; it doubles when an answer needs more.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
    at: usize,
    strings: &'a mut Strings,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>, strings: &'a mut Strings, status: u8) -> Writer<'a> {
        let mut writer = Writer {
            out,
            at: 0,
            strings,
        };
        writer.fixed([0; header::OUTPUTS]);
        writer.set(header::STATUS, [status]);
        if writer.strings.slots.len() < slot::COUNT {
            writer.strings.slots.resize(slot::COUNT, String::new());
        }
        writer
    }

    /// Fills in the header's length, size, output count and wake-up time.
    pub(crate) fn finish(mut self, count: u32, wake_at: Option<u64>) {
        let len = self.at as u32;
        let size = self.out.len() as u32;
        self.set(header::LENGTH, len.to_le_bytes());
        self.set(header::SIZE, size.to_le_bytes());
        self.set(header::COUNT, count.to_le_bytes());
        self.set(header::HAS_WAKE, [u8::from(wake_at.is_some())]);
        self.set(
            header::WAKE_AT,
            wake_at.map_or(0.0, |t| t as f64).to_le_bytes(),
        );
    }

    /// A few bytes at a place already written (the header's).
    fn set<const N: usize>(&mut self, at: usize, bytes: [u8; N]) {
        if let Some(to) = self
            .out
            .get_mut(at..at + N)
            .and_then(|to| <&mut [u8; N]>::try_from(to).ok())
        {
            *to = bytes;
        }
    }

    /// A few bytes: one store (an array assignment, where `copy_from_slice` would call
    /// a generic copy).
    #[inline]
    fn fixed<const N: usize>(&mut self, bytes: [u8; N]) {
        let end = self.at + N;
        if end > self.out.len() {
            self.grow(end);
        }
        self.set(self.at, bytes);
        self.at = end;
    }

    fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        if end > self.out.len() {
            self.grow(end);
        }
        if let Some(to) = self.out.get_mut(self.at..end) {
            to.copy_from_slice(bytes);
        }
        self.at = end;
    }

    #[cold]
    fn grow(&mut self, end: usize) {
        let size = end.max(2 * self.out.len()).max(256);
        self.out.resize(size, 0);
        // The whole allocation: what JS may use for the next input.
        let capacity = self.out.capacity();
        self.out.resize(capacity, 0);
    }

    fn byte(&mut self, b: u8) {
        self.fixed([b]);
    }

    fn u32(&mut self, n: u32) {
        self.fixed(n.to_le_bytes());
    }

    fn f64(&mut self, n: f64) {
        self.fixed(n.to_le_bytes());
    }

    pub(crate) fn str(&mut self, s: &str) {
        if s.len() < usize::from(string::LONG) && s.is_ascii() {
            self.byte(s.len() as u8);
        } else {
            self.byte(string::LONG);
            self.u32(s.len() as u32);
        }
        self.put(s.as_bytes());
    }

    /// A request id: `INPUT_ID` when it is the input's own, else at its slot.
    fn request(&mut self, id: &str) {
        if self.is_input_id(id) {
            self.byte(string::INPUT_ID);
        } else {
            self.shared(slot::REQUEST, id);
        }
    }

    /// A request id with no slot (a wait's: each is another request's).
    fn request_unshared(&mut self, id: &str) {
        if self.is_input_id(id) {
            self.byte(string::INPUT_ID);
        } else {
            self.str(id);
        }
    }

    fn is_input_id(&self, id: &str) -> bool {
        !id.is_empty() && same_text(&self.strings.input_id, id)
    }

    /// A string at a place with a slot: by reference when it is the slot's.
    fn shared(&mut self, slot: usize, s: &str) {
        self.shared_up_to(slot, s, SLOT_LONGEST);
    }

    /// A string kept in `table` at an executor's place in the roster (`at`), when it
    /// has one: a reference when the table holds that string there; else at `slot`.
    fn placed(&mut self, table: u8, at: Option<usize>, s: &str, slot: usize) {
        let Some(i) = at.filter(|&i| i < TABLE_PLACES && !s.is_empty() && s.len() <= SLOT_LONGEST)
        else {
            return self.shared(slot, s);
        };
        let Some(places) = self.strings.tables.get_mut(usize::from(table)) else {
            return self.shared(slot, s);
        };
        if places.len() <= i {
            places.resize(i + 1, String::new());
        }
        let Some(held) = places.get_mut(i) else {
            return self.shared(slot, s);
        };
        let [b0, b1, b2, b3] = (i as u32).to_le_bytes();
        if same_text(held, s) {
            self.fixed([string::PLACE, table, b0, b1, b2, b3]);
        } else {
            held.clear();
            held.push_str(s);
            self.fixed([string::SET_PLACE, table, b0, b1, b2, b3]);
            self.str(s);
        }
    }

    /// The message of an event read in place, kept in `table` at the executor's place.
    fn message(&mut self, output: &OutputRef<'_>, table: u8, at: Option<usize>) {
        let mut message = std::mem::take(&mut self.strings.message);
        message.clear();
        output.write_message(&mut message);
        self.placed(table, at, &message, slot::EVENT_MESSAGE);
        self.strings.message = message;
    }

    /// As `shared`, for strings up to `longest` bytes.
    fn shared_up_to(&mut self, slot: usize, s: &str, longest: usize) {
        if s.is_empty() || s.len() > longest {
            return self.str(s);
        }
        let Some(last) = self.strings.slots.get_mut(slot) else {
            return self.str(s);
        };
        if same_text(last, s) {
            self.fixed([string::SLOT, slot as u8]);
        } else {
            last.clear();
            last.push_str(s);
            self.fixed([string::SET_SLOT, slot as u8]);
            self.str(s);
        }
    }

    fn json(&mut self, value: &Value) {
        self.str(&to_text(value));
    }

    fn value(&mut self, slot: usize, value: &Value) {
        match value {
            Value::Null => self.byte(value::NULL),
            Value::Bool(false) => self.byte(value::FALSE),
            Value::Bool(true) => self.byte(value::TRUE),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => {
                    self.byte(value::NUMBER);
                    self.f64(u as f64);
                }
                (None, Some(i), _) => {
                    self.byte(value::NUMBER);
                    self.f64(i as f64);
                }
                (None, None, Some(f)) => {
                    self.byte(value::NUMBER);
                    self.f64(f);
                }
                _ => {
                    self.byte(value::JSON);
                    self.json(value);
                }
            },
            Value::String(s) => {
                self.byte(value::STRING);
                if slot < slot::COUNT {
                    self.shared(slot, s);
                } else {
                    self.str(s);
                }
            }
            _ => {
                self.byte(value::JSON);
                self.json(value);
            }
        }
    }

    /// A grant's record (without its owner: a shared roster's grant is `json`).
    fn granted(&mut self, grant: &Grant<'_>) {
        self.byte(output_kind::GRANTED);
        self.request(grant.request);
        self.f64(grant.lease as f64);
        self.placed(
            table::EXECUTOR,
            grant.executor_at,
            grant.executor,
            slot::EXECUTOR,
        );
        self.shared(slot::ROLE, grant.role);
        self.u32(grant.passed);
        let occupied = if grant.occupied {
            grant_extra::OCCUPIED
        } else {
            0
        };
        let held = if grant.hold.is_some() {
            grant_extra::HOLD
        } else {
            0
        };
        self.byte(occupied | held);
        if let Some(hold) = grant.hold {
            self.json(hold);
        }
    }

    /// Writes an output read in place. `last_grant` is the lease of the `granted`
    /// record written just before, if the record before was one (its event,
    /// `GRANTED_EVENT`, takes that grant's fields on the JS side).
    pub(crate) fn output_ref(&mut self, output: &OutputRef<'_>, last_grant: &mut Option<u64>) {
        let previous = last_grant.take();
        match output {
            OutputRef::Output(output) => self.output(output),
            // A numbered (`clone`) or borrowing (`because`) grant is `json`, as is its event.
            OutputRef::Granted(grant)
                if grant.owner.is_none() && grant.clone.is_none() && grant.because.is_none() =>
            {
                self.granted(grant);
                *last_grant = Some(grant.lease);
            }
            OutputRef::GrantedEvent(level, grant)
                if grant.owner.is_none()
                    && grant.because.is_none()
                    && previous == Some(grant.lease)
                    && !grant.has_extra_fields() =>
            {
                // The grant's event: its fields are the grant's (JS takes them from it).
                self.fixed([output_kind::GRANTED_EVENT, *level as u8]);
                self.message(output, table::GRANTED, grant.executor_at);
            }
            OutputRef::Released {
                level,
                executor,
                at,
                lease,
            } => {
                self.fixed([output_kind::RELEASED_EVENT, *level as u8]);
                self.placed(table::EXECUTOR, Some(*at), executor, slot::EXECUTOR);
                self.f64(*lease as f64);
                self.message(output, table::RELEASED, Some(*at));
            }
            // A shared roster's grant (it names its owner) or a numbered clone's, or an
            // event whose fields are not the grant's before it: built, and written as
            // any output.
            OutputRef::Granted(grant) => self.output(&grant.output()),
            OutputRef::GrantedEvent(level, grant) => self.output(&grant.event(*level)),
        }
    }

    /// Writes a built output.
    fn output(&mut self, output: &Output) {
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                clone: None,
                role,
                hold,
                passed,
                occupied,
                borrowed: false,
                because: None,
                owner: None,
            } => self.granted(&Grant {
                request,
                lease: *lease,
                executor,
                executor_at: None,
                role,
                hold: hold.as_ref(),
                passed: *passed,
                occupied: *occupied,
                borrowed: false,
                because: None,
                label: None,
                owner: None,
                clone: None,
                purpose: None,
                waited_ms: None,
                tenant: None,
                affinity: None,
            }),
            Output::Waiting {
                request,
                role,
                report,
                ahead,
                spent,
                owner: None,
            } if spent.is_empty() => {
                self.byte(output_kind::WAITING);
                self.request_unshared(request);
                self.shared(slot::ROLE, role);
                self.shared_up_to(slot::REPORT, report, REPORT_LONGEST);
                self.u32(*ahead);
            }
            Output::Event {
                level,
                name,
                message,
                fields,
            } => {
                self.byte(output_kind::EVENT);
                self.byte(*level as u8);
                self.shared(slot::EVENT_NAME, name);
                self.shared(slot::EVENT_MESSAGE, message);
                self.u32(fields.len() as u32);
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i < slot::FIELDS {
                        self.shared(slot::FIELD_KEY + i, key);
                    } else {
                        self.str(key);
                    }
                    let slot = match key {
                        "request" => slot::REQUEST,
                        "executor" => slot::EXECUTOR,
                        "role" => slot::ROLE,
                        _ => slot::FIELD_VALUE + i,
                    };
                    self.value(slot, value);
                }
            }
            Output::Persist { ids, state } => {
                self.byte(output_kind::PERSIST);
                self.strs(ids);
                self.u32(state.version);
                self.u32(state.exclusions.len() as u32);
                for x in &state.exclusions {
                    self.str(&x.id);
                    self.shared(slot::EXCLUSION_REASON, &x.reason);
                    self.shared(slot::EXCLUSION_KIND, x.kind.name());
                    match x.until {
                        Some(until) => {
                            self.byte(1);
                            self.f64(until as f64);
                        }
                        None => self.byte(0),
                    }
                }
            }
            // A shared roster's grant or wait (it names its owner), and the rare outputs.
            _ => self.as_json(output),
        }
    }

    /// A count and the strings.
    fn strs(&mut self, strings: &[String]) {
        self.u32(strings.len() as u32);
        for s in strings {
            self.str(s);
        }
    }

    /// An output as its canonical text.
    fn as_json(&mut self, output: &Output) {
        self.byte(output_kind::JSON);
        let text = rota_core::write::to_json_text(output);
        self.str(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An input of `kind` with `flags` and `small`, `now` 1, and these strings.
    fn input_of(kind: u8, flags: u8, small: u8, strings: &[&str]) -> Vec<u8> {
        let mut buf = vec![0; input::STRINGS];
        buf[input::KIND] = kind;
        buf[input::FLAGS] = flags;
        buf[input::SMALL] = small;
        buf[input::NOW..input::NOW + 8].copy_from_slice(&1.0f64.to_le_bytes());
        for s in strings {
            buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
            buf.extend_from_slice(s.as_bytes());
        }
        buf
    }

    fn group(name: &str) -> Vec<(&'static str, u64)> {
        FORMAT
            .iter()
            .find(|(group, _)| *group == name)
            .map(|(_, entries)| entries.to_vec())
            .unwrap_or_default()
    }

    #[test]
    fn the_table_js_reads_is_the_table_rust_uses() {
        let table: Value = serde_json::from_str(&format_json()).expect("JSON text");
        assert_eq!(table.as_object().map(Map::len), Some(FORMAT.len() + 3));
        for &(name, entries) in FORMAT {
            for &(key, value) in entries {
                assert_eq!(table[name][key].as_u64(), Some(value), "{name}.{key}");
            }
        }
        assert_eq!(table["slot"]["count"].as_u64(), Some(slot::COUNT as u64));
        assert_eq!(table["outputKind"]["persist"].as_u64(), Some(6));
        assert_eq!(
            table["inputFields"]["release"],
            serde_json::json!(["now", "lease"])
        );
    }

    #[test]
    fn tags_and_flags_are_distinct() {
        for name in ["inputKind", "outputKind", "string", "value", "status"] {
            let entries = group(name);
            assert!(!entries.is_empty(), "{name}");
            for (i, (a, x)) in entries.iter().enumerate() {
                for (b, y) in &entries[i + 1..] {
                    assert_ne!(x, y, "{name}: {a} and {b}");
                }
            }
        }
        for name in ["requestFlag", "reportFlag", "grantExtra"] {
            let mut seen = 0u64;
            for (key, bit) in group(name) {
                assert!(bit.is_power_of_two() && bit < 0x100, "{name}.{key}");
                assert_eq!(seen & bit, 0, "{name}.{key}");
                seen |= bit;
            }
        }
        // The level byte's bit is no level's.
        for &level in Level::ALL {
            assert_eq!(level as u8 & step::NO_PERSIST, 0, "{}", level.name());
        }
        // An ASCII string's length byte is below every code.
        for (key, code) in group("string") {
            assert!(code >= u64::from(string::LONG), "string.{key}");
        }
        // The numbers of an input lie between `now` and the strings, 8 bytes each.
        for name in ["requestAt", "reportAt", "releaseAt"] {
            for (key, at) in group(name) {
                assert!(
                    at >= input::NOW as u64 + 8 && at + 8 <= input::STRINGS as u64,
                    "{name}.{key}"
                );
            }
        }
        assert!(slot::COUNT <= 0x100 && table::COUNT as usize == group("table").len() - 1);
    }

    #[test]
    fn input_kinds_are_the_core_s_input_types() {
        for (name, kind) in group("inputKind") {
            let strings: &[&str] = match name {
                "lease" | "tryLease" => &["r1", "coder"],
                "cancel" => &["r1"],
                "report" => &["e1", "boom"],
                "resume" | "probeResult" => &["e1"],
                _ => &[],
            };
            let mut buf = input_of(kind as u8, 0, 0, strings);
            if name == "report" {
                buf[input::FLAGS] = report_flag::KIND;
            }
            let input = read_input(&buf).unwrap_or_else(|| panic!("{name} reads"));
            assert_eq!(input.kind(), name);
        }
        assert!(read_input(&input_of(0, 0, 0, &[])).is_none());
        assert!(read_input(&input_of(9, 0, 0, &[])).is_none());
    }

    #[test]
    fn failure_kinds_and_levels_are_the_core_s_names() {
        let table: Value = serde_json::from_str(&format_json()).expect("JSON text");
        for (name, small) in table["failureKind"].as_object().expect("kinds") {
            let small = small.as_u64().expect("a byte") as u8;
            let buf = input_of(input_kind::REPORT, report_flag::KIND, small, &["e1", ""]);
            let Some(Input::Report { failure, .. }) = read_input(&buf) else {
                panic!("{name}: a report");
            };
            assert_eq!(failure.kind.map(FailureKind::name), Some(name.as_str()));
        }
        for &level in Level::ALL {
            let byte = table["level"][level.name()].as_u64();
            assert_eq!(byte, Some(u64::from(level as u8)), "{}", level.name());
            assert_eq!(step_level(level as u8), (level, false));
            assert_eq!(step_level(level as u8 | step::NO_PERSIST), (level, true));
        }
    }

    #[test]
    fn a_report_carries_its_facts() {
        let mut buf = input_of(
            input_kind::REPORT,
            report_flag::TAG
                | report_flag::CODE
                | report_flag::STATUS
                | report_flag::RETRY_AFTER_MS,
            0,
            &["e1", "429 Too Many Requests", "RateLimitError", "E_RATE"],
        );
        buf[report_at::STATUS..report_at::STATUS + 8].copy_from_slice(&429.0f64.to_le_bytes());
        buf[report_at::RETRY_AFTER_MS..report_at::RETRY_AFTER_MS + 8]
            .copy_from_slice(&60_000.0f64.to_le_bytes());
        let Some(Input::Report {
            executor, failure, ..
        }) = read_input(&buf)
        else {
            panic!("a report");
        };
        assert_eq!(executor, "e1");
        let want = Failure {
            tag: Some("RateLimitError".into()),
            status: Some(429),
            code: Some("E_RATE".into()),
            retry_after_ms: Some(60_000),
            ..Failure::new("429 Too Many Requests")
        };
        assert_eq!(failure, want);
        // A status the JSON reader refuses is refused here too (it words the error).
        buf[report_at::STATUS..report_at::STATUS + 8].copy_from_slice(&600.0f64.to_le_bytes());
        assert!(read_input(&buf).is_none());
    }

    #[test]
    fn same_text_is_string_equality() {
        let texts = [
            "",
            "a",
            "e0 busy",
            "e0 busy; e1 busy",
            "e0 busy; e1 bust",
            "e0 busy; e1 busy; e2 busy; e3 busy; and 60 more",
            "f0 busy; e1 busy; e2 busy; e3 busy; and 60 more",
            "e0 busy; e1 busy; e2 busy; e3 busy; and 60 mord",
            "é0 busy",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_text(a, b), a == b, "{a:?} and {b:?}");
            }
        }
    }
}
