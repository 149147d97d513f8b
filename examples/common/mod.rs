//! What the soak examples share: their command line of `--flag N` pairs and
//! their one JSON report on stdout.

/// Hands each `--flag N` pair of the command line (`N` a number) to `take`,
/// which says whether it knows the flag; prints `usage` and exits 2 at a
/// flag it does not know, or one without a number.
pub(crate) fn numeric_flags(usage: &str, mut take: impl FnMut(&str, u64) -> bool) {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        if !value.is_some_and(|n| take(&arg, n)) {
            eprintln!("usage: {usage}");
            std::process::exit(2);
        }
    }
}

/// Prints `report` on stdout, one pretty JSON object; exits 1 if `failed`.
pub(crate) fn report(report: &serde_json::Value, failed: bool) {
    println!(
        "{}",
        serde_json::to_string_pretty(report).unwrap_or_default()
    );
    if failed {
        std::process::exit(1);
    }
}
