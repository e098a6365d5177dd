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

Then import lines, under `from __gin__ import dynamic_registration`: it builds
fake modules holding one object per full name (plus modules t5x.cpp does not
have, e.g. t5x.examples.scalable_t5.network), runs gin-config's own
ParseContext on import lines and resolves names with it (as get_configurable
does), writing `import<TAB>LINE;LINE...<TAB>NAME<TAB>FULL` where FULL is the
registered full name of the object gin-config reaches, or empty when it
reaches none (no such attribute, or an object t5x.cpp does not register).
"""
import os
import re
import sys
import types

import gin
from gin import config_parser

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
    for lines, name, full in import_rows(fulls):
      f.write('import\t%s\t%s\t%s\n' % (';'.join(lines), name, full))


def fake_modules(fulls, make_object=lambda: eval('lambda x=None: x'), extra_modules=()):
  """sys.modules entries for every module path of `fulls`; an object per full name.

  make_object() makes each object (a distinct function); `extra_modules` are
  module objects to install as well (with their parent packages).
  """
  foreign = ['t5x.examples.scalable_t5.network.T5Config',
             't5x.examples.scalable_t5.network.Transformer']
  objects = {}
  for full in fulls + foreign:
    fn = make_object()
    fn.full_name = full if full in fulls else ''
    objects[full] = fn
  modules = {m.__name__: m for m in extra_modules}
  for path in list(modules):
    parts = path.split('.')
    for i in range(1, len(parts)):
      modules.setdefault('.'.join(parts[:i]), types.ModuleType('.'.join(parts[:i])))
  for full in objects:
    parts = full.split('.')
    for i in range(1, len(parts)):
      path = '.'.join(parts[:i])
      if path not in objects and path not in modules:
        modules[path] = types.ModuleType(path)
  for path, value in list(modules.items()) + list(objects.items()):
    if '.' in path:
      parent, attr = path.rsplit('.', 1)
      setattr(modules.get(parent) or objects[parent], attr, value)
  sys.modules.update(modules)
  # t5x's scripts run as __main__ (train.py defines train, ...).
  main = sys.modules['__main__']
  for name in ('train_script.train', 'eval_script.evaluate', 'infer_script.infer'):
    setattr(main, name.split('.')[1], objects[name])
  return modules


def import_rows(fulls):
  modules = fake_modules(fulls)
  cases = [
      (['from t5x.contrib.moe import partitioning as moe_partitioning'],
       ['moe_partitioning.MoePjitPartitioner', 'moe_partitioning.PjitPartitioner']),
      (['from t5x.examples.scalable_t5 import network'], ['network.T5Config', 'network.Transformer']),
      (['from t5x.examples.t5 import network'], ['network.T5Config', 'network.Transformer']),
      (['import t5x.examples.t5.network as net'], ['net.T5Config', 'net.DatasetConfig']),
      (['import t5x.utils'], ['t5x.utils.DatasetConfig', 't5x.models.EncoderDecoderModel',
                              't5x.DatasetConfig']),
      (['from t5x import models'], ['models.EncoderDecoderModel.predict_batch_with_aux',
                                    'models.MoeEncoderDecoderModel']),
      (['from t5x import utils as u'], ['u.DatasetConfig']),
      (['from t5x.contrib.moe import partitioning', 'from t5x import partitioning'],
       ['partitioning.PjitPartitioner', 'partitioning.MoePjitPartitioner']),
      (['import __main__ as train_script'], ['train_script.train']),
      (['import __main__ as eval_script'], ['eval_script.evaluate']),
      (['import __main__ as infer_script'], ['infer_script.infer']),
  ]
  # Every registered full name through each import form gin accepts (only
  # modules can be imported).
  for full in fulls:
    parts = full.split('.')
    for k in range(1, len(parts)):
      module = '.'.join(parts[:k])
      if module not in modules:
        continue
      rest = '.'.join(parts[k:])
      if k >= 2:
        cases.append((['from %s import %s' % ('.'.join(parts[:k - 1]), parts[k - 1])],
                      [parts[k - 1] + '.' + rest]))
      cases.append((['import %s as alias_' % module], ['alias_.' + rest]))
      cases.append((['import %s' % module], [full]))
  rows = []
  for lines, names in cases:
    with gin.config._parse_scope() as context:
      for line in ['from __gin__ import dynamic_registration'] + lines:
        for statement in config_parser.ConfigParser(line, gin.config.ParserDelegate()):
          context.process_import(statement)
      for name in names:
        try:
          _, values = context._resolve_selector(name)
          full = getattr(values[-1], 'full_name', '')
        except (NameError, AttributeError):
          full = ''
        rows.append((lines, name, full))
  return rows


if __name__ == '__main__':
  main()
