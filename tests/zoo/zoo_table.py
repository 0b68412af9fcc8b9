#!/usr/bin/python3
"""The README's zoo table from zoo_check.py --results files (run_zoo.sh --results FILE --part N):

    /usr/bin/python3 tests/zoo/zoo_table.py RESULTS.jsonl... [--expect-all]

One row a model, one compact column a check; a check run again for a model (zoo_check.py --only)
replaces that cell, and the seconds add up. A judged number shows as "error ≤ limit" (or ">" and FAIL) with the
limit's origin: b = the check's bound, t = twice torch fp32's error on the same pieces
(zoo_check.judge). --expect-all names the in-scope models (run_zoo.sh's ZOO) that have no row and
exits non-zero if any.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICT = re.compile(r"([0-9.]+e[-+][0-9]+) (<=|>) ([0-9.]+e[-+][0-9]+) \((bound|2x torch fp32)\)")


def verdicts(text):
    return " / ".join("%s %s %s %s" % (e, "≤" if op == "<=" else ">", limit, "b" if by == "bound" else "t")
                      for e, op, limit, by in VERDICT.findall(text))


def rewrite(text):
    """"amp-run 4.7e-02, ORT 3.0e-02; all-fp16 reference 5.7e-02; ..." -> the first two parts."""
    return "; ".join(text.split("; ")[:2]).replace(" reference", " ref")


def cuda_plan(text):
    m = re.match(r"(\d+) units \((\d+) generated\), arena ([0-9.]+ MiB), moved ([0-9.]+ MiB)", text)
    return "%s units, arena %s, moved %s" % (m.group(1), m.group(3), m.group(4)) if m else text


def train16(text):
    m = re.match(r"loss vs fp32: (.*?); fp32 vs torch fp64", text)
    return re.sub(r" \(torch autocast [^)]*\)", "", m.group(1)) if m else text


COLUMNS = [("sgd", "sgd: 1 step", verdicts), ("steps", "steps: gradient / loss", verdicts),
           ("momentum", "momentum: 3 losses", verdicts), ("forward", "forward", verdicts),
           ("fp16 rewrite", "fp16 rewrite: amp-run, ORT", rewrite), ("bf16 rewrite", "bf16 rewrite: amp-run", rewrite),
           ("memory", "memory fp16, bf16 of fp32", lambda t: t.split(" (batch")[0]),
           ("train16", "train16: loss vs fp32", train16), ("cuda plan", "CUDA plan (bf16 step)", cuda_plan)]


def cell(check, compact):
    if check is None:
        return "—"
    word = {True: "ok", False: "FAIL", None: "n/a"}[check["ok"]]
    body = compact(check["text"]) if check["ok"] is not None else check["text"]
    return "%s %s" % (word, body or check["text"][:120])


def in_scope():
    """run_zoo.sh's ZOO: its four PARTs in order."""
    text = open(os.path.join(HERE, "run_zoo.sh")).read()
    return sum((re.search(r'^PART%d="([^"]*)"' % i, text, re.M).group(1).split() for i in range(1, 5)), [])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results", nargs="+")
    p.add_argument("--expect-all", action="store_true")
    a = p.parse_args()
    rows = {}
    for path in a.results:
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                if r["model"] in rows:  # a later run of some checks replaces those cells only
                    rows[r["model"]]["checks"].update(r["checks"])
                    rows[r["model"]]["seconds"] += r["seconds"]
                else:
                    rows[r["model"]] = r
    order = in_scope()
    names = [m for m in order if m in rows] + sorted(m for m in rows if m not in order)
    print("| model | parameters | " + " | ".join(title for _, title, _ in COLUMNS) + " | s |")
    print("|---|---|" + "---|" * len(COLUMNS) + "---|")
    for m in names:
        r = rows[m]
        print("| %s | %s | %s | %d |" % (m, r["params"], " | ".join(cell(r["checks"].get(k), f) for k, _, f in COLUMNS),
                                        r["seconds"]))
    failed = [m for m in names if any(c["ok"] is False for c in rows[m]["checks"].values())]
    missing = [m for m in order if m not in rows]
    print("\n%d models, %d with a failed check%s; %d in scope without a row%s" % (
        len(names), len(failed), " (%s)" % ", ".join(failed) if failed else "", len(missing),
        " (%s)" % ", ".join(missing) if missing else ""))
    sys.exit(1 if failed or (a.expect_all and missing) else 0)


if __name__ == "__main__":
    main()
