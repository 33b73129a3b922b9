// Version 1: passes when the answer contains the expected text anywhere.
function grade(input) {
  const ok = input.output.includes(input.expected)
  return { pass: ok, score: ok ? 1 : 0, reasoning: ok ? 'contains ' + input.expected : 'lacks ' + input.expected }
}
