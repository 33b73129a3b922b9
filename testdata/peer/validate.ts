// Validates JSON Lines files with the acp-harness's own Zod schemas:
//   bun validate.ts KIND FILE...
// KIND is capture, trials, or a name of the peer's schema registry
// (Session, McpServerConfig, JsonRpcRequest, JsonRpcResponse, JsonRpcError).
// Every line must parse; trials-summary lines are counted apart. Prints
// "N passed, N failed" and exits 1 when any line failed.
import { readFileSync } from 'node:fs'
import {
  CaptureResultSchema,
  JsonRpcErrorSchema,
  JsonRpcRequestSchema,
  JsonRpcResponseSchema,
  McpServerSchema,
  SessionSchema,
  TrialResultSchema,
} from '@plaited/agent-eval-harness/schemas'

const [kind, ...files] = process.argv.slice(2)
const schemas: Record<string, { safeParse: (v: unknown) => { success: boolean; error?: { issues: unknown[] } } }> = {
  capture: CaptureResultSchema,
  trials: TrialResultSchema,
  Session: SessionSchema,
  McpServerConfig: McpServerSchema,
  JsonRpcRequest: JsonRpcRequestSchema,
  JsonRpcResponse: JsonRpcResponseSchema,
  JsonRpcError: JsonRpcErrorSchema,
}
const schema = schemas[kind]
if (!schema) {
  console.error(`unknown kind ${kind}`)
  process.exit(2)
}
let passed = 0
let failed = 0
let summaries = 0
for (const file of files) {
  const lines = readFileSync(file, 'utf8').split('\n')
  lines.forEach((line, i) => {
    if (!line.trim()) return
    const value = JSON.parse(line)
    if (value.type === 'trials-summary') {
      summaries++
      return
    }
    const result = schema.safeParse(value)
    if (result.success) {
      passed++
    } else {
      failed++
      console.error(`${file}:${i + 1}: ${JSON.stringify(result.error?.issues.slice(0, 3))}`)
    }
  })
}
if (summaries > 0) console.error(`${summaries} trials-summary lines skipped`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : 0)
