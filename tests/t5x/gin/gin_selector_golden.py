#!/usr/bin/env python3
"""Writes testdata/python_gin_selectors.tsv: which registered configurables
Python gin-config matches for a name written in gin text.

It registers a function under every full name of t5x's registry (read from
src/t5x/gin/t5x_configurables.cpp: each `X.add("name", ...)` with X's module
path) and asks gin-config's registry (selector_map.SelectorMap) for the
matches of every dotted suffix of each full name, and of those suffixes with
a foreign or repeated module prefix. GinRegistry.MatchesPythonGinSelectors in
registry_test.cpp checks the C++ registry against it. Run from the
repository root after changing the registered names:
    pip install gin-config==0.5.0
    python3 tests/t5x/gin/gin_selector_golden.py
Rows: `full<TAB>NAME` for each registered full name, then
`query<TAB>NAME<TAB>MATCH,MATCH...` (empty: no configurable matching NAME).
"""
import os
import re

import gin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))


def full_names():
  with open(os.path.join(ROOT, 'src', 't5x', 'gin', 't5x_configurables.cpp')) as f:
    text = f.read()
  modules = dict(re.findall(r'const Module (\w+)\{r, "([^"]*)"\}', text))
  out = []
  for var, name in re.findall(r'\b(\w+)\.add\("([^"]+)"', text):
    out.append(modules[var] + '.' + name if modules[var] else name)
  assert len(out) == len(set(out)) and len(out) > 50, out
  return out


def main():
  fulls = full_names()
  for i, full in enumerate(fulls):
    module, name = full.rsplit('.', 1)
    fn = eval('lambda: None')  # a distinct function per name
    fn.__name__ = 'f%d' % i
    gin.external_configurable(fn, name=name, module=module)
  queries = []
  for full in fulls:
    parts = full.split('.')
    for i in range(len(parts)):
      suffix = '.'.join(parts[i:])
      queries += [suffix, 'garbage.' + suffix]
    queries += ['t5x.' + full, '.'.join(parts[:-1] + ['x', parts[-1]]), parts[-1][1:]]
  registry = gin.config._REGISTRY
  out = os.path.join(HERE, 'testdata', 'python_gin_selectors.tsv')
  with open(out, 'w') as f:
    for full in sorted(fulls):
      f.write('full\t%s\n' % full)
    seen = set()
    for q in queries:
      if q in seen:
        continue
      seen.add(q)
      f.write('query\t%s\t%s\n' % (q, ','.join(sorted(registry.matching_selectors(q)))))


if __name__ == '__main__':
  main()
