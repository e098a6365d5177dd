#!/usr/bin/env python3
"""Writes python_gin_statements.tsv: the statements Python gin-config's own
parser (pip gin-config) reads from configs/**/*.gin and testdata/features.gin.

gin_python_test in config files_test.cpp checks the C++ parser against it:
same statements, lines, scopes, names, and values printed as Python repr.
Run from the repository root after changing those files:
    pip install gin-config==0.5.0
    python3 tests/t5x/gin/gin_python_golden.py
"""
import glob
import os

import gin.config_parser as cp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))


class _Ref:
  def __init__(self, scoped_name, evaluate):
    self.text = '@' + scoped_name + ('()' if evaluate else '')


class _Macro:
  def __init__(self, name):
    self.text = '%' + name


class _Delegate(cp.ParserDelegate):
  def configurable_reference(self, scoped_name, evaluate):
    return _Ref(scoped_name, evaluate)

  def macro(self, name):
    return _Macro(name)


def fmt(v):
  """Python repr, with gin references and macros written as in gin text."""
  if isinstance(v, (_Ref, _Macro)):
    return v.text
  if isinstance(v, list):
    return '[' + ', '.join(fmt(x) for x in v) + ']'
  if isinstance(v, tuple):
    if len(v) == 1:
      return '(' + fmt(v[0]) + ',)'
    return '(' + ', '.join(fmt(x) for x in v) + ')'
  if isinstance(v, dict):
    return '{' + ', '.join(fmt(k) + ': ' + fmt(x) for k, x in v.items()) + '}'
  return repr(v)


def rows(rel):
  with open(os.path.join(ROOT, rel)) as f:
    text = f.read()
  for st in cp.ConfigParser(text, _Delegate()):
    line = st.location.line_num
    if isinstance(st, cp.ImportStatement):
      yield [rel, 'import', line, '', '', '', '']
    elif isinstance(st, cp.IncludeStatement):
      yield [rel, 'include', line, '', '', '', st.filename]
    elif isinstance(st, cp.BindingStatement):
      if not st.arg_name:
        yield [rel, 'macro', line, '', '', st.selector, fmt(st.value)]
      else:
        yield [rel, 'binding', line, st.scope, st.selector, st.arg_name, fmt(st.value)]
    # BlockDeclaration: its bindings come as BindingStatements.


def main():
  files = sorted(os.path.relpath(p, ROOT)
                 for p in glob.glob(os.path.join(ROOT, 'configs', '**', '*.gin'), recursive=True))
  files.append('tests/t5x/gin/testdata/features.gin')
  out = os.path.join(HERE, 'testdata', 'python_gin_statements.tsv')
  with open(out, 'w') as f:
    for rel in files:
      for r in rows(rel):
        cells = [str(c) for c in r]
        assert not any('\t' in c or '\n' in c for c in cells), cells
        f.write('\t'.join(cells) + '\n')
  print('wrote', out)


if __name__ == '__main__':
  main()
