// ESLint for the browser worker's in-page JavaScript: the scripts that the
// Go side embeds and runs in Chromium (services/browser/internal/page/*.js,
// services/browser/internal/nostrjs/nostr.js). `make lint` runs it from the
// repository root:
//
//	scripts/jslint/node_modules/.bin/eslint --config scripts/jslint/eslint.config.js <files>
//
// None of these files is loaded as a script or module: the Go side wraps
// each one (an expression or a function declaration) in a call it sends
// over CDP, so the rules about scripts' globals and top-level expressions
// do not apply. The rules added to eslint:recommended are the ones that
// catch bugs in code of this kind; none is about layout.
'use strict';

const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 'latest',
      sourceType: 'script',
      // Chromium's: page.js, forms.js and call.js run in an isolated world
      // of a frame; serialize.js, park.js, eval_*.js and nostr.js in the
      // page's main world.
      globals: { ...globals.browser },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Each file is one expression that Go wraps in a call.
      'no-unused-expressions': 'off',
      'no-unused-vars': ['error', { varsIgnorePattern: '^_', argsIgnorePattern: '^_' }],
      // == only against null (x == null: null or undefined).
      eqeqeq: ['error', 'smart'],
      // A name that hides an outer one (the ref start, the text function)
      // is a read of the wrong variable waiting to happen.
      'no-shadow': 'error',
      'no-use-before-define': ['error', { functions: false, classes: true, variables: false }],
      'consistent-return': 'error',
      'array-callback-return': 'error',
      'no-promise-executor-return': 'error',
      'no-self-compare': 'error',
      'no-template-curly-in-string': 'error',
      'no-unmodified-loop-condition': 'error',
      'no-unreachable-loop': 'error',
      'no-loop-func': 'error',
      'no-implied-eval': 'error',
      'no-eval': 'error',
      'no-throw-literal': 'error',
      'no-return-assign': 'error',
      'no-sequences': 'error',
      radix: 'error',
      'prefer-const': 'error',
      'no-var': 'error',
    },
  },
  {
    // eval's scripts are templates: eval.go puts the model's script (and
    // the parked element's name, and eval_element.js) in place of these.
    files: ['**/page/eval_*.js'],
    languageOptions: {
      globals: { __SCRIPT__: 'readonly', __KEY__: 'readonly', __FUNCTION__: 'readonly' },
    },
  },
  {
    // nostr.js is a template: nostrjs.Source puts the binding's and the
    // reply function's names and two limits in place of these.
    files: ['**/nostrjs/nostr.js'],
    languageOptions: {
      globals: { __BINDING__: 'readonly', __REPLY__: 'readonly', __MAX__: 'readonly', __MAX_PENDING__: 'readonly' },
    },
  },
];
