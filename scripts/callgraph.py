#!/usr/bin/env python3
"""Who calls whom, from the object files of a build tree.

usage: scripts/callgraph.py [BUILD_DIR] [--edges] [--folder DIR]

BUILD_DIR defaults to build/ at the top of the tree and must have been built
(scripts/setup.sh; `make -C BUILD_DIR/tests check TESTS=` adds the test
programs' objects). For every .o, `nm` gives the global symbols the object
defines and the ones it leaves undefined; an undefined symbol that another
source file defines is an edge from the first file to the second (a call, or
a reference to a function table or a global). Calls through inline functions
of headers and through function pointers are not seen, except where a file
names the table the pointers are in.

Prints the components (folders) and which ones each refers to, then per
folder its files in layers by calls (layer 0 calls no other file of the
folder; a file sits one layer above the highest file it calls, and the files
of a cycle share one layer) with the references to data that go up a layer,
then every cycle between files (a strongly connected component of more than
one file) with the edges inside it: once for calls, once for calls and
references to data. Symbols the C library also defines (the interposed
clocks) bind within their own folder only; in tests/, a file binds to the
files of its own test program first.
--edges also lists every file-to-file edge; --folder DIR limits the
per-folder output to DIR.
"""

import argparse
import collections
import os
import subprocess
import sys

FOLDERS = ("common", "checkpoint", "cmserver", "client", "dispatcher", "netpipe", "tests")
# Automake names a test program's objects after its folder in tests/.
TEST_TARGETS = ("unit_", "programs_", "apps_", "fuzz_")
# nm's letters for a defined function; the other defined ones are data.
FUNCTION_KINDS = "TtWi"


def source_of(build, top, obj):
    """(source file relative to top, test program or None) for an object.
    Automake prefixes the objects of a program with per-target flags with
    its name ("cmrun-job.o"; in tests/unit/ "test_mpi-test_mpi.o", and a
    file of another folder compiled into it "client/unit_test_mpi-conn.o"):
    the test program is what tells link units apart in tests/."""
    rel = os.path.relpath(obj, build)
    parts = [p for p in rel.split(os.sep) if p != ".libs"]
    folder = os.path.join(*parts[:-1]) if len(parts) > 1 else ""
    stem = parts[-1][:-2]
    for i, ch in enumerate(stem):
        if ch != "-":
            continue
        src = os.path.join(folder, stem[i + 1 :] + ".c")
        if os.path.isfile(os.path.join(top, src)):
            prefix = stem[:i]
            if parts[0] == "tests" and len(parts) > 2:
                return src, f"{parts[1]}_{prefix}"
            if parts[0] != "tests" and prefix.startswith(TEST_TARGETS):
                return src, prefix
            return src, None
    src = os.path.join(folder, stem + ".c")
    return (src, None) if os.path.isfile(os.path.join(top, src)) else (None, None)


def nm_symbols(obj):
    out = subprocess.run(
        ["nm", "-P", obj], check=True, capture_output=True, text=True
    ).stdout
    defined, undefined = {}, set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in "wvi":
            defined[name] = "call" if kind in FUNCTION_KINDS else "data"
    return defined, undefined


def libc_symbols():
    """What the C library defines: a file that defines one of these too
    (libchanmem interposes time and gettimeofday) serves only its own
    folder; every other program gets the C library's."""
    path = subprocess.run(
        ["cc", "-print-file-name=libc.so.6"], capture_output=True, text=True
    ).stdout.strip()
    if not os.path.isabs(path):
        return set()
    out = subprocess.run(
        ["nm", "-D", "-P", "--defined-only", path], capture_output=True, text=True
    ).stdout
    return {line.split()[0].split("@")[0] for line in out.splitlines() if line}


def folder_of(src):
    return src.split(os.sep)[0]


def scc(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def layers(nodes, edges):
    """Layer of each node: 0 for no edge out, else 1 + the highest callee's
    layer; the members of a cycle share one layer."""
    comps = scc(nodes, edges)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    level = {}
    # Tarjan emits components callees first, so one pass suffices.
    for i, comp in enumerate(comps):
        lv = 0
        for n in comp:
            for m in edges[n]:
                if comp_of[m] != i:
                    lv = max(lv, level[comp_of[m]] + 1)
        level[i] = lv
    return {n: level[comp_of[n]] for n in nodes}, comps


def print_cycles(comps, edges, why):
    cycles = sorted(c for c in comps if len(c) > 1)
    for c in cycles:
        print(f"- {' '.join(c)}")
        members = set(c)
        for a in c:
            inside = sorted(b for b in edges[a] if b in members)
            if inside:
                named = [f"{b} [{','.join(sorted(why[(a, b)])[:3])}]" for b in inside]
                print(f"    {a} -> " + "; ".join(named))
    if not cycles:
        print("none")


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(
        description="file and folder call graph from nm on a build tree",
        usage="scripts/callgraph.py [BUILD_DIR] [--edges] [--folder DIR]",
    )
    ap.add_argument("build", nargs="?", default=os.path.join(top, "build"))
    ap.add_argument("--edges", action="store_true", help="list every file-to-file edge")
    ap.add_argument("--folder", choices=FOLDERS, help="per-folder output for this folder only")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not os.path.isdir(build):
        sys.exit(f"callgraph: {build}: no such build directory (run scripts/setup.sh)")

    defs = collections.defaultdict(dict)
    undefs = collections.defaultdict(set)
    units = collections.defaultdict(set)  # test program -> its sources
    programs_of = collections.defaultdict(set)
    for dirpath, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".o"):
                continue
            obj = os.path.join(dirpath, f)
            src, program = source_of(build, top, obj)
            if src is None or folder_of(src) not in FOLDERS:
                continue
            if program:
                units[program].add(src)
                programs_of[src].add(program)
                if folder_of(src) != "tests":
                    continue  # the component's own object counts for it
            d, u = nm_symbols(obj)
            defs[src].update(d)
            undefs[src] |= u
    if not defs:
        sys.exit(f"callgraph: no object files under {build} (build it first)")

    definers = collections.defaultdict(set)
    for src, syms in defs.items():
        for sym in syms:
            definers[sym].add(src)
    libc = libc_symbols()

    # kind -> file -> files it refers to; (file, file) -> symbols
    edges = {k: collections.defaultdict(set) for k in ("call", "data")}
    why = collections.defaultdict(set)
    ambiguous = collections.Counter()
    for src in defs:
        for k in edges:
            edges[k][src]
        for sym in undefs[src]:
            cands = definers.get(sym, set()) - {src}
            if sym in libc:
                cands = {c for c in cands if folder_of(c) == folder_of(src)}
            # Test programs that define the same symbol (main, a fake
            # transport) are different link units: a file of tests/ binds to
            # the files linked into the same program first, then to the
            # libraries; a file elsewhere never binds to tests/.
            # A test program without flags of its own has no prefix: its
            # folder stands for the unit.
            if programs_of[src]:
                unit = set().union(*(units[p] for p in programs_of[src]))
            else:
                unit = {c for c in cands if os.path.dirname(c) == os.path.dirname(src)}
            if folder_of(src) == "tests" and cands & unit:
                cands = cands & unit
            else:
                cands = {c for c in cands if folder_of(c) != "tests"}
            if len(cands) > 1:
                ambiguous[sym] += 1
            for c in cands:
                edges[defs[c][sym]][src].add(c)
                why[(src, c)].add(sym)
    calls = edges["call"]
    refs = {n: calls[n] | edges["data"][n] for n in defs}

    nodes = set(defs)
    print("== components (folder -> folders it refers to, symbols)")
    fedges = collections.defaultdict(collections.Counter)
    for (a, b), syms in why.items():
        fa, fb = folder_of(a), folder_of(b)
        if fa != fb:
            fedges[fa][fb] += len(syms)
    for f in FOLDERS:
        outs = ", ".join(f"{g} ({n})" for g, n in sorted(fedges[f].items()))
        print(f"{f:11} -> {outs or '-'}")

    for folder in FOLDERS:
        if args.folder and folder != args.folder:
            continue
        fnodes = {n for n in nodes if folder_of(n) == folder}
        fe = {n: {m for m in calls[n] if m in fnodes} for n in fnodes}
        lv, _ = layers(fnodes, fe)
        print(f"\n== {folder}/ layers by calls (top first)")
        for k in sorted(set(lv.values()), reverse=True):
            names = sorted(os.path.relpath(n, folder) for n in fnodes if lv[n] == k)
            print(f"{k:3}: {' '.join(names)}")
        up = sorted(
            (a, b) for a in fnodes for b in edges["data"][a] if b in fnodes and lv[b] > lv[a]
        )
        for a, b in up:
            data = sorted(sym for sym in why[(a, b)] if defs[b][sym] == "data")
            print(f"     data upwards: {a} -> {b} [{','.join(data[:3])}]")

    print("\n== cycles between files (calls)")
    print_cycles(layers(nodes, calls)[1], calls, why)
    print("\n== cycles between files (calls and references to data)")
    print_cycles(layers(nodes, refs)[1], refs, why)

    if args.edges:
        print("\n== edges (file -> file: symbols)")
        for a in sorted(refs):
            for b in sorted(refs[a]):
                print(f"{a} -> {b}: {' '.join(sorted(why[(a, b)]))}")
    if ambiguous:
        print(f"\n({len(ambiguous)} symbols defined in more than one file; edges go to each)")
        for sym, _ in ambiguous.most_common(10):
            print(f"    {sym}: {' '.join(sorted(definers[sym]))}")


if __name__ == "__main__":
    main()
