// Version 2: passes when the answer's number is the expected one, in
// digits or in words ("44" is not 4, "four" is).
const words = { zero: '0', one: '1', two: '2', three: '3', four: '4', five: '5' }
function grade(input) {
  const tokens = input.output.toLowerCase().match(/[a-z]+|\d+/g) || []
  const numbers = tokens.map((t) => words[t] ?? t).filter((t) => /^\d+$/.test(t))
  const ok = numbers.length > 0 && numbers[numbers.length - 1] === input.expected
  return { pass: ok, score: ok ? 1 : 0, reasoning: 'numbers: ' + (numbers.join(', ') || 'none') }
}
