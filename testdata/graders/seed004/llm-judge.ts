// llm-judge.ts
import Anthropic from '@anthropic-ai/sdk'
import type { Grader } from '@plaited/acp-harness/schemas'

const client = new Anthropic()

export const grade: Grader = async ({ input, output, expected }) => {
  const response = await client.messages.create({
    model: 'claude-sonnet-4-20250514',
    max_tokens: 256,
    messages: [{
      role: 'user',
      content: `Task: ${input}
Expected: ${expected || 'N/A'}
Agent output: ${output}

Did the agent correctly complete the task? Respond with JSON:
{"pass": true/false, "score": 0.0-1.0, "reasoning": "brief explanation"}`
    }]
  })

  const text = response.content[0].type === 'text' ? response.content[0].text : ''
  return JSON.parse(text)
}
