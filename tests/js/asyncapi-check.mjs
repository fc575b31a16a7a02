// Reads an AsyncAPI document as the AsyncAPI tools do: the official parser
// (@asyncapi/parser), whose diagnostics of severity error mean no tool can use the document,
// then modelina, generating TypeScript models from it. Prints what it found in each, in
// order, as a JSON array of
//   { "document": path, "parsed": bool, "errors": [{code, message, path}],
//     "messages": [{id, properties, required}], "models": {name: code} }
// and exits 1 when a document does not parse, has errors, or gives no models. Several
// documents in one run load the tools once.
//
//   node tests/js/asyncapi-check.mjs DOCUMENT.json...
import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';
import { TypeScriptGenerator } from '@asyncapi/modelina';

const parser = new Parser();
const generator = new TypeScriptGenerator({ modelType: 'interface' });
const reports = [];
for (const path of process.argv.slice(2)) {
  reports.push(await check(path));
}
console.log(JSON.stringify(reports, null, 1));
process.exit(reports.every((r) => r.usable) ? 0 : 1);

async function check(path) {
  const text = readFileSync(path, 'utf8');
  const { document, diagnostics } = await parser.parse(text);
  // Severity 0 is an error; 1-3 are warnings, hints and information.
  const errors = diagnostics
    .filter((d) => d.severity === 0)
    .map((d) => ({ code: d.code, message: d.message, path: d.path.join('/') }));
  const report = { document: path, parsed: document !== undefined, errors, messages: [], models: {} };
  if (document) {
    for (const message of document.components().messages()) {
      const payload = message.payload();
      report.messages.push({
        id: message.id(),
        properties: Object.keys(payload?.properties() ?? {}).sort(),
        required: [...(payload?.required() ?? [])].sort(),
      });
    }
    for (const model of await generator.generate(JSON.parse(text))) {
      report.models[model.modelName] = model.result;
    }
  }
  report.usable = report.parsed && errors.length === 0 && Object.keys(report.models).length > 0;
  return report;
}
