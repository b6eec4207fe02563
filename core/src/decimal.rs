//! A plain decimal (`\d+(\.\d+)?`, the number of a duration string) as the nearest
//! `f64`, ties to even: exactly what `str::parse::<f64>` gives for that text.
//!
//! Why not `str::parse`: core's float parser brings a 10 KB table of powers of five
//! (Eisel-Lemire) into the WebAssembly module, about 6% of the web build gzipped,
//! and a duration is its only user (serde_json parses JSON numbers with its own
//! code). Durations are read rarely and are short, so this reads the number as an
//! exact fraction of big integers and divides once, which is short and always exact.
//! `tests::agrees_with_str_parse` compares the two.

use std::cmp::Ordering;

/// A natural number in base 2^32, least significant digit first, no high zeros.
type Big = Vec<u32>;

/// `a = a * m + add`.
fn mul_add(a: &mut Big, m: u32, add: u32) {
    let mut carry = u64::from(add);
    for digit in a.iter_mut() {
        let x = u64::from(*digit) * u64::from(m) + carry;
        *digit = x as u32;
        carry = x >> 32;
    }
    if carry > 0 {
        a.push(carry as u32);
    }
}

/// `a * 2^n`.
fn shl(a: &[u32], n: u64) -> Big {
    let mut out = vec![0; (n / 32) as usize];
    let mut carry = 0;
    for &digit in a {
        let x = u64::from(digit) << (n % 32);
        out.push(x as u32 | carry);
        carry = (x >> 32) as u32;
    }
    out.push(carry);
    trim(&mut out);
    out
}

fn trim(a: &mut Big) {
    while a.last() == Some(&0) {
        a.pop();
    }
}

fn cmp(a: &[u32], b: &[u32]) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

/// `a -= b`, for `a >= b`.
fn sub(a: &mut Big, b: &[u32]) {
    let mut borrow = 0;
    for (i, digit) in a.iter_mut().enumerate() {
        let x = i64::from(*digit) - i64::from(b.get(i).copied().unwrap_or(0)) - borrow;
        *digit = x as u32;
        borrow = i64::from(x < 0);
    }
    trim(a);
}

/// The number of bits of `a` (0 for zero).
fn bits(a: &[u32]) -> i64 {
    a.last().map_or(0, |top| {
        32 * a.len() as i64 - i64::from(top.leading_zeros())
    })
}

/// `n * 2^s / m` as a quotient below 2^54 and its remainder, with the divisor.
fn divide(n: &[u32], m: &[u32], s: i64) -> (u64, Big, Big) {
    let mut rest = shl(n, s.max(0) as u64);
    let divisor = shl(m, (-s).max(0) as u64);
    let mut q = 0;
    for bit in (0..54).rev() {
        let part = shl(&divisor, bit);
        if cmp(&rest, &part) != Ordering::Less {
            sub(&mut rest, &part);
            q |= 1 << bit;
        }
    }
    (q, rest, divisor)
}

/// The nearest `f64` to `text`, which matches `\d+(\.\d+)?`.
pub(crate) fn parse_decimal(text: &str) -> f64 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    // text = n / m, m = 10^(digits after the point).
    let mut n = Big::new();
    for b in whole.bytes().chain(fraction.bytes()) {
        mul_add(&mut n, 10, u32::from(b - b'0'));
    }
    if n.is_empty() {
        return 0.0;
    }
    let mut m: Big = vec![1];
    for _ in 0..fraction.len() {
        mul_add(&mut m, 10, 0);
    }
    // The value is q * 2^-s with 2^52 <= q < 2^53 (a normal f64's significand), or
    // with s = 1074 and q < 2^52 below the normal range (a subnormal's). This `s`
    // puts n * 2^s / m strictly between 2^52 and 2^54.
    let mut s = 53 - (bits(&n) - bits(&m));
    let (mut q, mut rest, mut divisor) = divide(&n, &m, s);
    if q >= 1 << 53 {
        s -= 1;
        (q, rest, divisor) = divide(&n, &m, s);
    }
    if s > 1074 {
        s = 1074;
        (q, rest, divisor) = divide(&n, &m, s);
    }
    // Beyond f64::MAX even before rounding.
    if s < -971 {
        return f64::INFINITY;
    }
    // Round to nearest, ties to even.
    match cmp(&shl(&rest, 1), &divisor) {
        Ordering::Greater => q += 1,
        Ordering::Equal => q += q & 1,
        Ordering::Less => {}
    }
    // The biased exponent minus one, plus q with its leading bit: a q rounded up to
    // 2^53 carries into the exponent (to infinity past f64::MAX), and a subnormal's
    // q (exponent field 0) rounded up to 2^52 becomes the least normal.
    f64::from_bits((((1074 - s) as u64) << 52) + q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn same(text: &str) {
        let want: f64 = text.parse().unwrap_or(f64::NAN);
        assert_eq!(
            parse_decimal(text).to_bits(),
            want.to_bits(),
            "{text}: {} vs {want}",
            parse_decimal(text)
        );
    }

    #[test]
    fn agrees_with_str_parse_on_the_edges() {
        let zeros = |n: usize| "0".repeat(n);
        for text in [
            "0".to_string(),
            "000".into(),
            "0.0".into(),
            "1".into(),
            "1.5".into(),
            "0.1".into(),
            "0.3".into(),
            "123456.789".into(),
            // Around 2^53: ties to even, either way.
            "9007199254740992".into(),
            "9007199254740993".into(),
            "9007199254740995".into(),
            "9007199254740993.0000000000000000001".into(),
            "18014398509481985".into(),
            // f64::MAX, the halfway point past it, and beyond.
            "179769313486231570814527423731704356798070567525844996598917476803157260780028538760589558632766878171540458953514382464234321326889464182768467546703537516986049910576551282076245490090389328944075868508455133942304583236903222948165808559332123348274797826204144723168738177180919299881250404026184124858368".into(),
            "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497792".into(),
            format!("1{}", zeros(400)),
            // The least normal, the greatest subnormal, the least subnormal, its
            // half (a tie, to 0) and just above its half.
            format!("0.{}22250738585072014", zeros(307)),
            format!("0.{}22250738585072009", zeros(307)),
            format!("0.{}49406564584124654", zeros(323)),
            format!("0.{}24703282292062327208828439643411068618252990130716238221279284125033775363510437593264991818081799618989828234772285886546332835517796989819938739800539093906315035659515570226392290858392449105184435931802849936536152500319370457678249219365623669863658480757001585769269903706311928279558551332927834338409351978015531246597263579574622766465272827220056374006485499977096599470454020828166226237857393450736339007967761930577506740176324673600968951340535537458516661134223766678604162159680461914467291840300530057530849048765391711386591646239524912623653881879636239373280423891018672348497668235089863388587925628302755995657524455507255189313690836254779186948667994968324049705821028513185451396213837722826145437693412532098591327667236328125", zeros(323)),
            format!("0.{}247032822920623272088284396434110686182529901307162382212792841250337753635104375932649918180817996189898282347722858865463328355177969898199387398005390939063150356595155702263922908583924491051844359318028499365361525003193704576782492193656236698636584807570015857692699037063119282795585513329278343384093519780155312465972635795746227664652728272200563740064854999770965994704540208281662262378573934507363390079677619305775067401763246736009689513405355374585166611342237666786041621596804619144672918403005300575308490487653917113865916462395249126236538818796362393732804238910186723484976682350898633885879256283027559956575244555072551893136908362547791869486679949683240497058210285131854513962138377228261454376934125320985913276672363281251", zeros(323)),
            format!("0.{}1", zeros(400)),
        ] {
            same(&text);
        }
    }

    proptest! {
        #[test]
        fn agrees_with_str_parse(text in "[0-9]{1,30}(\\.[0-9]{1,40})?") {
            same(&text);
        }

        #[test]
        fn agrees_with_str_parse_on_long_fractions(
            whole in "[0-9]{1,3}",
            zeros in 0usize..340,
            digits in "[0-9]{1,60}",
        ) {
            same(&format!("{whole}.{}{digits}", "0".repeat(zeros)));
        }
    }
}
