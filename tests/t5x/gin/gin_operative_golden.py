#!/usr/bin/env python3
"""Writes testdata/operative/NAME.gin: the operative config `t5x config` prints
for each case of testdata/operative/cases.tsv, after Python gin-config has read
it back.

A run writes the same text to MODEL_DIR/config.gin (Config::operative_config_str),
and t5x users read that file with Python gin. Each case's text is parsed by
gin-config 0.5.0's own parser under dynamic registration, with fake modules
holding an object per full name of t5x.cpp's registry (the objects take any
parameter), plus seqio's and T5's preprocessor and metric modules, whose
names task files refer to. The case passes when gin-config reads every import,
resolves every name to a module object, and stores as many bindings and
macros as the text has lines of them. operative_golden.sh then requires
`t5x config` to print the same text. Run from the repository root after
changing the writer or the cases:
    pip install gin-config==0.5.0
    python3 tests/t5x/gin/gin_operative_golden.py [build/bin/t5x]
"""
import os
import re
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
OUT = os.path.join(HERE, 'testdata', 'operative')

# Modules whose attributes task files name (preprocessors, metrics, sources):
# any attribute is an object of that module.
OPEN_MODULES = ['seqio', 'seqio.preprocessors', 't5.data.preprocessors', 't5.evaluation.metrics']


def cases():
  with open(os.path.join(OUT, 'cases.tsv')) as f:
    for line in f:
      if line.strip() and not line.startswith('#'):
        cells = line.rstrip('\n').split('\t')
        yield cells[0], cells[1:]


def golden_module():
  sys.path.insert(0, HERE)
  import gin_selector_golden  # pylint: disable=g-import-not-at-top
  return gin_selector_golden


class OpenModule(types.ModuleType):

  def __getattr__(self, attr):
    if attr.startswith('__'):
      raise AttributeError(attr)
    fn = eval('lambda *args, **kwargs: None')  # pylint: disable=eval-used
    fn.full_name = self.__name__ + '.' + attr
    setattr(self, attr, fn)
    return fn


def install_fake_modules():
  # Objects that take any parameter, so that gin-config accepts every binding.
  g = golden_module()
  g.fake_modules(g.full_names(), make_object=lambda: eval('lambda *args, **kwargs: None'),  # pylint: disable=eval-used
                 extra_modules=[OpenModule(path) for path in OPEN_MODULES])


def check(path):
  """Parses one operative config with gin-config; raises on a difference."""
  import gin  # pylint: disable=g-import-not-at-top
  install_fake_modules()
  with open(path) as f:
    text = f.read()
  gin.parse_config(text)
  lines = [l for l in text.splitlines()
           if l and not l.startswith('#') and not l.startswith(('import ', 'from '))]
  stored = sum(len(params) for params in gin.config._CONFIG.values())  # pylint: disable=protected-access
  if stored != len(lines):
    raise SystemExit('%s: gin-config stored %d bindings and macros, the text has %d' % (path, stored, len(lines)))
  for scope_selector in gin.config._CONFIG:  # pylint: disable=protected-access
    selector = scope_selector[1]
    if selector == 'gin.macro':
      continue
    fn = gin.config._REGISTRY[selector].wrapped  # pylint: disable=protected-access
    if not getattr(fn, 'full_name', ''):
      raise SystemExit('%s: %s reached no registered object' % (path, selector))


def main():
  if len(sys.argv) == 3 and sys.argv[1] == '--check':
    check(sys.argv[2])
    return
  t5x = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, 'build', 'bin', 't5x')
  for name, args in cases():
    text = subprocess.run([t5x, 'config'] + args, cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout
    path = os.path.join(OUT, name + '.gin')
    with open(path, 'w') as f:
      f.write(text)
    # A fresh interpreter per case: gin-config's registry is process-wide.
    subprocess.run([sys.executable, __file__, '--check', path], check=True)
    print('gin-config read', name)


if __name__ == '__main__':
  main()
