// A fixture grader (acp-harness module style): the output passes when it
// contains the expected text. A reference containing "(I think)" makes it
// throw, to test grader errors.
export function grade({ output, expected }) {
  if (output.includes('(I think)')) {
    throw new Error('cannot grade hedged answers')
  }
  const pass = Boolean(expected) && output.includes(expected)
  return { pass, score: pass ? 1 : 0, reasoning: pass ? `contains ${expected}` : `missing ${expected}` }
}
