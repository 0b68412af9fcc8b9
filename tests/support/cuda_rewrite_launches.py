#!/usr/bin/env python3
"""Rewrites a CUDA source (backends/cuda/*.cu) into host C++ for the kernel emulator
(tests/support/cuda_emulator.h), at build time; the .cu file itself is never modified.

Three rewrites, nothing else changes (every line keeps its number, and a #line directive names
the original file, so compiler messages, __FILE__ and __LINE__ point into the .cu file):

  KERNEL<<<grid, block[, shared_bytes[, stream]]>>>(args...)
    -> ::amp_emu::launch("KERNEL", __FILE__, __LINE__, KERNEL, BOUND, grid, block[, ...])(args...)
     BOUND: the max-threads expression of the __launch_bounds__ of KERNEL's definition in the same
     file, 0 when it has none (a launched kernel defined elsewhere is an error)
  extern __shared__ [__align__(n)] T name[];
    -> T* const name = static_cast<T*>(::amp_emu::detail::dynamic_shared_memory());
  __shared__ T name[N];  (inside a function)
    -> static T name[N]; ::amp_emu::detail::shared_declared(&name, sizeof name);

A function-level static is one object for all fibers of the running block: __shared__'s
semantics, as blocks run one after another. shared_declared() fills it with 0xff bytes (NaN as a
float) when the first thread of a block passes the declaration, so a read of shared memory that
no thread of this block wrote shows up, as the garbage it is on a GPU. (GCC ignores section
attributes on statics of template instances, so the statics cannot be found any other way.) A
__shared__ variable at namespace scope stays a plain static (the prelude's macro), unpoisoned.

KERNEL is the expression before <<< (a name, possibly qualified, with template arguments); the
configuration may span lines and nest parentheses. Comments and string literals are skipped.
Usage: cuda_rewrite_launches.py IN.cu OUT.cc
"""
import os
import re
import sys


def code_mask(text):
    """True for each character that is code, False inside comments and string/char literals."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k] = False
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                mask[k] = False
            i = j + 1
        else:
            i += 1
    return mask


def fail(path, text, pos, why):
    line = text.count("\n", 0, pos) + 1
    sys.exit(f"{path}:{line}: cuda_rewrite_launches: {why}")


def kernel_start(text, end, path):
    """Start of the kernel expression that ends just before `end` (the <<<)."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    while True:
        if i > 0 and text[i - 1] == ">":  # template arguments: back to the matching <
            depth, i = 0, i - 1
            while i >= 0:
                if text[i] == ">":
                    depth += 1
                elif text[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
                i -= 1
            if i < 0:
                fail(path, text, end, "unbalanced template arguments before <<<")
        j = i
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
            j -= 1
        if j == i:
            fail(path, text, end, "no kernel name before <<<")
        i = j
        if i >= 2 and text[i - 2:i] == "::":
            i -= 2
            if i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_>"):
                return i  # ::name
            continue
        return i


def config_end(text, start, mask, path):
    """Index of the >>> that closes the configuration starting at `start`."""
    depth, i = 0, start
    while i < len(text):
        if mask[i]:
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif depth == 0 and text.startswith(">>>", i):
                return i
        i += 1
    fail(path, text, start, "no >>> closes the launch configuration")


def launch_bounds(text, mask):
    """Per __global__ function defined in text: the max-threads expression of its __launch_bounds__, or "0"."""
    bounds = {}
    for m in re.finditer(r"__global__\s+void\s+(?:__launch_bounds__\s*\(\s*([^,()]+)[^)]*\)\s*)?(\w+)\s*\(", text):
        if mask[m.start()]:
            bounds[m.group(2)] = (m.group(1) or "0").strip()
    return bounds


def rewrite(text, path):
    mask = code_mask(text)
    bounds = launch_bounds(text, mask)
    out, pos = [], 0
    for m in re.finditer(r"<<<", text):
        if not mask[m.start()] or m.start() < pos:
            continue
        k = kernel_start(text, m.start(), path)
        kernel = text[k:m.start()].rstrip()
        end = config_end(text, m.end(), mask, path)
        after = end + 3
        while after < len(text) and text[after].isspace():
            after += 1
        if after >= len(text) or text[after] != "(":
            fail(path, text, end, "a launch configuration not followed by the kernel's arguments")
        name = " ".join(kernel.split())
        config = " ".join(text[m.end():end].split())
        base = re.sub(r"<.*", "", name).split("::")[-1].strip()
        if base not in bounds:
            fail(path, text, k, f"the launched kernel {base} is not defined in this file")
        out.append(text[pos:k])
        out.append(f'::amp_emu::launch("{name}", __FILE__, __LINE__, {name}, {bounds[base]}, {config})')
        # The lines the launch spanned stay lines, so everything after keeps its line number.
        out.append("\n" * text.count("\n", k, end + 3))
        pos = end + 3
    out.append(text[pos:])
    text = "".join(out)

    def dynamic_shared(m):
        decl = re.sub(r"__align__\s*\(\s*\d+\s*\)", " ", m.group(1))
        ctype = " ".join(decl.split())
        return f"{ctype}* const {m.group(2)} = static_cast<{ctype}*>(::amp_emu::detail::dynamic_shared_memory());"

    text = re.sub(r"extern\s+__shared__\s+([^;\[]+?)\s+(\w+)\s*\[\s*\]\s*;", dynamic_shared, text)

    mask = code_mask(text)
    in_function = function_scope(text, mask)
    out, pos = [], 0
    for m in re.finditer(r"\b__shared__\b([^;]*);", text):
        if not mask[m.start()] or not in_function[m.start()]:
            continue
        decl = m.group(1)
        if "," in re.sub(r"<[^<>]*>|\([^()]*\)|\[[^\[\]]*\]", "", decl):
            fail(path, text, m.start(), "one __shared__ variable per declaration, please")
        name = re.search(r"(\w+)\s*(\[[^;]*\])?\s*$", decl)
        if not name:
            fail(path, text, m.start(), "cannot find the name of this __shared__ variable")
        out.append(text[pos:m.start()])
        out.append(f"static{decl}; ::amp_emu::detail::shared_declared(&{name.group(1)}, sizeof {name.group(1)});")
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def function_scope(text, mask):
    """True for each character inside a function body: within a brace that namespace, class,
    struct, union, enum or extern "C" did not open (or within any brace inside a function)."""
    inside = [False] * len(text)
    stack, depth_fn, head = [], 0, []
    for i, c in enumerate(text):
        inside[i] = depth_fn > 0
        if not mask[i] and c not in "\"":
            continue
        if c == "{":
            h = "".join(head)
            scope = re.search(r"\bnamespace\b|\bextern\s*\"", h) or (
                re.search(r"\b(class|struct|union|enum)\b", h) and "(" not in h)
            is_fn = depth_fn > 0 or not scope
            stack.append(is_fn)
            depth_fn += is_fn
            head = []
        elif c in "};":
            if c == "}" and stack:
                depth_fn -= stack.pop()
            head = []
        else:
            head.append(c)
    return inside


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: cuda_rewrite_launches.py IN.cu OUT.cc")
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    result = f'#line 1 "{os.path.abspath(src)}"\n' + rewrite(text, src)
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(dst, "w", encoding="utf-8") as f:
        f.write(result)


if __name__ == "__main__":
    main()
